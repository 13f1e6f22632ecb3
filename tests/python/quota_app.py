"""The app of the calendar quotas' done-when scenario (test_quota_servers.py): a
FastAPI route limited to "100/minute;1000000/month" per API key (the X-API-Key
header) in Europe/Berlin, shared by every worker through the directory
CELLRATE_REGION (on a disk path: the counts outlive the processes)."""
import os

from fastapi import Depends, FastAPI

from cellrate.fastapi import RateLimit

limit = RateLimit("100/minute;1000000/month", tz="Europe/Berlin",
                  key=lambda request: request.header("x-api-key") or "anonymous",
                  admitted_headers=True, shared=os.environ["CELLRATE_REGION"])
app = FastAPI()


@app.get("/", dependencies=[Depends(limit)])
async def hello() -> str:
    return "ok"
