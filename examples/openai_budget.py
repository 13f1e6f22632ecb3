import os

import httpx

import cellrate
from cellrate.httpx import RateLimitTransport

requests_budget = cellrate.Limiter("500/minute", burst=1)  # the account's limits
tokens_budget = cellrate.Limiter("200000/minute", burst=20000)
transport = RateLimitTransport(requests_budget, tokens=tokens_budget,
                               estimate=lambda request: 100)  # held in flight, settled from usage
client = httpx.Client(base_url=os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1"),
                      headers={"Authorization": f"Bearer {os.environ['OPENAI_API_KEY']}"},
                      transport=transport)
for prompt in ["Say hello", "Say goodbye"]:
    reply = client.post("/chat/completions", json={"model": "gpt-4o-mini", "max_tokens": 100,
                                                   "messages": [{"role": "user", "content": prompt}]})
    print(reply.json()["choices"][0]["message"]["content"])
