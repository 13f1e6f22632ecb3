"""The app of the priorities' done-when scenario (test_priority_servers.py): a FastAPI
route limited by CELLRATE_LIMIT per client, shared by every worker through
CELLRATE_REGION, with the classes critical (reserve 0) and bulk (reserve 0.5); a
request's class is its X-Class header (default bulk)."""
import os

from fastapi import Depends, FastAPI

from cellrate.fastapi import RateLimit

limit = RateLimit(os.environ["CELLRATE_LIMIT"], priorities={"critical": 0, "bulk": 0.5},
                  priority=lambda request: request.header("x-class") or "bulk",
                  shared=os.environ["CELLRATE_REGION"])
app = FastAPI()


@app.get("/", dependencies=[Depends(limit)])
async def hello() -> str:
    return "ok"
