"""A fault-injecting OpenAI-compatible chat server for tests (127.0.0.1 only).

`FakeLLM(script=[...])` answers `POST /v1/chat/completions`. Each request takes the next action of
the script; once the script is used up every request is answered normally. Actions:

- `"ok"`: a normal reply (content from `reply(body)`);
- `("status", code, headers, body)`: an HTTP error, e.g. `("status", 429, {"Retry-After": "1"}, ...)`;
- `("sleep", seconds)`: wait (longer than the client's timeout) before answering normally;
- `("content", text)`: a 200 reply whose message content is `text` (e.g. broken JSON);
- `("finish", text, reason)`: like `content` with a finish reason (e.g. `"length"`).

It also answers Ollama's native `POST /api/chat` (the same script; the reply in Ollama's format:
`message.content`, `done_reason`) and `GET /v1/models` (the ids in `models`, default `[model]`).

Every request is recorded (`requests`: path, body, Authorization header, time; `gets`: the paths
of GET requests), and the largest number of requests handled at the same time is kept in
`max_in_flight`.
"""

import json
import re
import threading
import time

from standins.loopback import JSONHandler, LoopbackServer


def prompt_of(body: dict) -> str:
    "The user message of a chat request."
    return next(m["content"] for m in body["messages"] if m["role"] == "user")


def constant(text: str):
    "A reply function that answers every request with `text`."
    return lambda body: text


def qa_reply(body: dict) -> str:
    "A deterministic generation reply built from the prompt: two items whose answers come from the context."
    prompt = prompt_of(body)
    m = re.search(r'Context:\n"""(.*)"""\Z', prompt, re.S)
    context = m.group(1) if m else prompt
    title = re.search(r"^Title: (.*)$", prompt, re.M)
    words = context.split()
    return json.dumps(
        {
            "items": [
                {
                    "question": f"What does {title.group(1) if title else 'this provision'} begin with?",
                    "answer": " ".join(words[:6]),
                    "question_type": "other",
                },
                {
                    "question": "Which words close the provision?",
                    "answer": " ".join(words[-4:]),
                    "question_type": "other",
                },
            ]
        }
    )


class FakeLLM(LoopbackServer):
    def __init__(self, script=(), reply=qa_reply, delay: float = 0.0, model: str = "fake-model", models=None):
        self.script = list(script)
        self.reply = reply
        self.delay = delay
        self.model = model
        self.models = list(models) if models is not None else [model]
        self.requests: list[dict] = []
        self.gets: list[str] = []
        self.in_flight = self.max_in_flight = 0
        self._lock = threading.Lock()

    # -- server life cycle -------------------------------------------------------------
    def __enter__(self):
        fake = self

        class Handler(JSONHandler):
            def do_GET(self):
                with fake._lock:
                    fake.gets.append(self.path)
                self._send(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in fake.models]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with fake._lock:
                    action = fake.script.pop(0) if fake.script else "ok"
                    fake.requests.append(
                        {
                            "path": self.path,
                            "body": body,
                            "auth": self.headers.get("Authorization"),
                            "t": time.monotonic(),
                            "action": action,
                        }
                    )
                    fake.in_flight += 1
                    fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
                try:
                    if fake.delay:
                        time.sleep(fake.delay)
                    kind = action if isinstance(action, str) else action[0]
                    if kind == "status":
                        _, code, headers, payload = action
                        return self._send(code, payload, headers)
                    if kind == "sleep":
                        time.sleep(action[1])
                    content, finish = fake.reply(body), "stop"
                    if kind == "content":
                        content = action[1]
                    if kind == "finish":
                        content, finish = action[1], action[2]
                    if self.path.endswith("/api/chat"):  # Ollama's native chat API
                        return self._send(
                            200,
                            {
                                "model": body.get("model"),
                                "created_at": "2025-01-01T00:00:00Z",
                                "message": {"role": "assistant", "content": content},
                                "done": True,
                                "done_reason": finish,
                            },
                        )
                    self._send(
                        200,
                        {
                            "id": "chatcmpl-fake",
                            "object": "chat.completion",
                            "created": 0,
                            "model": body.get("model", fake.model),
                            "choices": [
                                {
                                    "index": 0,
                                    "finish_reason": finish,
                                    "message": {"role": "assistant", "content": content},
                                }
                            ],
                            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                        },
                    )
                finally:
                    with fake._lock:
                        fake.in_flight -= 1

        self.base_url = f"http://127.0.0.1:{self._serve(Handler)}/v1"
        return self

    # -- what the server saw -------------------------------------------------------------
    def prompts(self) -> list[str]:
        return [prompt_of(r["body"]) for r in self.requests]


def error_body(message: str) -> dict:
    "An OpenAI-style error payload."
    return {"error": {"message": message, "type": "invalid_request_error", "code": None}}
