"""The app of the plans' done-when scenario (test_plans_servers.py): a FastAPI route
limited per API key (X-API-Key) by CELLRATE_LIMIT, with the plan "pro" at
CELLRATE_PRO, shared by every worker through CELLRATE_REGION. A key's plan comes
from the server's own table of keys (CELLRATE_TIERS, JSON: key -> plan), never
from a header the client writes; a key the table does not know is on "default"."""
import json
import os

from fastapi import Depends, FastAPI

from cellrate.fastapi import RateLimit

TIERS = json.loads(os.environ["CELLRATE_TIERS"])
limit = RateLimit(os.environ["CELLRATE_LIMIT"], plans={"pro": os.environ["CELLRATE_PRO"]},
                  key=lambda request: request.header("x-api-key") or "anonymous",
                  plan=lambda request: TIERS.get(request.header("x-api-key"), "default"),
                  shared=os.environ["CELLRATE_REGION"])
app = FastAPI()


@app.get("/", dependencies=[Depends(limit)])
async def hello() -> str:
    return "ok"
