"""The key proxy (runner.hosts.keyproxy) in front of the fake Responses API: only its token, only the paths it
names, the real key put on the forwarded request and never handed back."""

from __future__ import annotations

import http.client
import json
import re
from urllib.parse import urlsplit

from runner.hosts.keyproxy import KeyProxy
from runner.testing.fake_openai import FakeOpenAI, text

KEY = "sk-proxy-test-real-key"


def post(url: str, path: str, headers: dict[str, str], body: dict) -> tuple[int, bytes]:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    connection.request("POST", path, body=json.dumps(body).encode(), headers={"content-type": "application/json",
                                                                                **headers})
    reply = connection.getresponse()
    data = reply.read()
    connection.close()
    return reply.status, data


def test_only_its_token_and_its_paths_reach_the_api_with_the_real_key() -> None:
    with FakeOpenAI() as fake:
        fake.script("hello proxy", text("hi"))
        proxy = KeyProxy(fake.url + "/v1", KEY, (re.compile(r"/responses"),)).start()
        try:
            body = {"model": "m", "stream": True,
                    "input": [{"type": "message", "role": "user", "content": [{"type": "input_text",
                                                                               "text": "hello proxy"}]}]}
            status, _ = post(proxy.url, "/v1/responses", {"authorization": "Bearer not-the-token"}, body)
            assert status == 401 and fake.requests == []
            status, _ = post(proxy.url, "/v1/files", {"authorization": f"Bearer {proxy.token}"}, body)
            assert status == 403 and fake.requests == []
            status, data = post(proxy.url, "/v1/responses", {"authorization": f"Bearer {proxy.token}"}, body)
            assert status == 200 and b"response.completed" in data and KEY.encode() not in data
            [seen] = fake.requests
            assert seen.headers["authorization"] == f"Bearer {KEY}" and seen.path == "/v1/responses"
            assert proxy.forwarded == 1 and proxy.refused == 2
            assert KEY not in repr(proxy) and proxy.url.endswith("/v1")
        finally:
            proxy.close()
