"""An OpenAI-compatible stand-in on 127.0.0.1 answering under every paper model name: the one fake LLM server of the
tests and of the dress rehearsal.

`OpenAIStandIn(models=PAPER_MODELS, faults=Faults(...))` serves `GET /v1/models` and non-streaming
`POST /v1/chat/completions`, and Ollama's native `POST /api/chat` (the reply in Ollama's shape: `message.content`,
`done_reason`). Replies are deterministic and built only from what the request holds; they never see a gold answer.
The kind of request is recognised from its messages:

- QA baseline (`indicipr.systems.llm_qa`: `Context: \"\"\"...\"\"\"` + `Question: ...`): a span of the context chosen
  lexically (where the question's words are densest), its length and form depending on the model, as JSON
  `{"answer": ...}`; some models sometimes answer in plain text or re-cased (so that snapping is exercised);
- judge (`indicipr.analysis.quality`: the rubric and `question_specificity`...): 1-3 scores per criterion as JSON, from
  features of the pair (question length, answer length, legal words), varying a little per judge;
- generation (the card's prompt, `indicipr.build.generate.build_prompt`): `{"items": [...]}` of which most are good and
  some fail each of the filters F1-F6 and F9 where the context allows it (F4 needs a context of at most 380
  characters, F8 an editorial artifact in the context, F7 depends on the context only);
- anything else: `{}`.

A test may instead give the replies as a function of the request body (`reply=`, e.g. `constant(text)`), slow
every reply down (`delay=` seconds) and script what happens to the next requests (`script=`): each chat request
takes the next action of the script, and once the script is used up every request is answered as above. Actions:

- `"ok"`: the usual reply;
- `("status", code, headers, body)`: an HTTP error, e.g. `("status", 429, {"Retry-After": "1"}, error_body("slow"))`;
- `("sleep", seconds)`: wait (longer than the client's timeout) before the usual reply;
- `("content", text)`: a 200 reply whose message content is `text` (e.g. broken JSON);
- `("finish", text, reason)`: like `content` with a finish reason (e.g. `"length"`).

Faults (`Faults`): a low, seeded, deterministic share of FIRST attempts of a request (keyed by model and
prompt hash) gets 429 with `Retry-After`, 500, a delay (meant to exceed the client's timeout) or broken JSON;
a retry of the same request succeeds. An unknown model is a 404 like OpenAI's (like Ollama's on `/api/chat`).

`calls` counts requests per `(model, prompt hash)` and `served` counts successful replies, so a test can
assert that a resumed run made no repeated call (`repeated()`). Every chat request is also kept in `requests`
(path, body, Authorization header, arrival time) and every GET path in `gets`; the most requests handled at
once is `max_in_flight`. A request whose body is cut off (its client killed mid-send) is dropped unanswered and
unrecorded, as a real server drops it; a body that is not JSON gets OpenAI's 400.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass

from .loopback import JSONHandler, LoopbackServer

PAPER_MODELS = ("gpt-4o", "mistral:7b", "llama3.1:8b", "qwen2.5:7b", "gemma3:12b")
FAULT_KINDS = ("429", "500", "timeout", "broken_json")
STOP = frozenset(
    """a an the of to in on at by for with from into under as and or nor but if than then that this these
those such any all each every which who whom whose what when where why how is are was were be been being shall may
must will would should can could do does did has have had it its not no so section provide provides provided
sub""".split()
)


@dataclass
class Faults:
    "Which first attempts fail: `rate` of them (by a hash with `seed`), spread over `kinds`."

    rate: float = 0.0
    kinds: tuple = FAULT_KINDS
    seed: int = 0
    retry_after_s: float = 0.2  # the 429's Retry-After
    delay_s: float = 3.0  # the "timeout" fault: answer only after this many seconds

    def pick(self, key: str, attempt: int) -> str | None:
        "The fault of attempt number `attempt` (0-based) of request `key`, or None."
        if attempt > 0 or self.rate <= 0 or not self.kinds:
            return None
        h = int(hashlib.sha256(f"{self.seed}|{key}".encode()).hexdigest()[:12], 16)
        u = (h % 1_000_000) / 1_000_000
        if u >= self.rate:
            return None
        return self.kinds[(h // 1_000_000) % len(self.kinds)]


def _h(*parts) -> int:
    return int(hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:12], 16)


def words_with_spans(text: str) -> list[tuple[str, int, int]]:
    return [(m.group(), m.start(), m.end()) for m in re.finditer(r"\S+", text)]


def content_tokens(text: str) -> list[str]:
    return [t for t in re.findall(r"[a-z0-9]+", text.lower()) if t not in STOP and len(t) > 1]


# -- request kinds --------------------------------------------------------------------------------------------
def request_kind(messages: list[dict]) -> str:
    "`generation`, `judge`, `qa` or `other`, from the messages alone."
    first_user = next((m.get("content") or "" for m in messages if m.get("role") == "user"), "")
    system = next((m.get("content") or "" for m in messages if m.get("role") == "system"), "")
    if "EXTRACTIVE legal QA dataset" in first_user or "extractive legal QA" in system:
        return "generation"
    if "question_specificity" in first_user:
        return "judge"
    last_user = next((m.get("content") or "" for m in reversed(messages) if m.get("role") == "user"), "")
    if re.search(r'Context:\n"""', last_user) and "\nQuestion:" in last_user:
        return "qa"
    return "other"


# -- QA baseline ----------------------------------------------------------------------------------------------
QA_STYLE = {  # model -> (answer words, form): how each stand-in model answers
    "mistral:7b": (42, "json"),
    "llama3.1:8b": (30, "json"),
    "qwen2.5:7b": (24, "json"),
    "gemma3:12b": (34, "json"),
    "gpt-4o": (28, "json"),
}


def lexical_span(context: str, question: str, n_words: int, window: int = 10) -> str:
    "The `n_words` words of `context` after the place where the question's content words are densest."
    words = words_with_spans(context)
    if not words:
        return ""
    q = set(content_tokens(question))
    toks = [set(content_tokens(w)) for w, _, _ in words]
    best, best_i = -1, 0
    for i in range(len(words)):
        score = sum(1 for t in toks[max(0, i - window) : i] for x in t if x in q)
        if score > best:
            best, best_i = score, i
    i = best_i if best_i < len(words) else 0
    j = min(len(words), i + n_words)
    for k in range(i + max(4, n_words // 2), j):  # stop at a clause end when there is one
        if re.search(r"[.;:]$", words[k][0]):
            j = k + 1
            break
    return context[words[i][1] : words[j - 1][2]].rstrip(",;:")


def qa_reply(model: str, messages: list[dict]) -> str:
    last = next(m["content"] for m in reversed(messages) if m.get("role") == "user")
    m = re.search(r'Context:\n"""(.*)"""\n\nQuestion:\s*(.*)\Z', last, re.S)
    if not m:
        return json.dumps({"answer": ""})
    context, question = m.group(1), m.group(2).strip()
    shots = sum(1 for x in messages if x.get("role") == "assistant")
    n, form = QA_STYLE.get(model, (30, "json"))
    if shots:
        n = max(8, n - 6)  # few-shot answers come out a little shorter
    span = lexical_span(context, question, n)
    r = _h(model, question) % 100
    if r < 4:
        return span  # plain text instead of JSON
    if r < 7:
        return json.dumps({"answer": span.lower()})  # re-cased: not a verbatim span
    if r < 9:
        return json.dumps({"answer": f"As per the provision, {span}"})
    return json.dumps({"answer": span}, ensure_ascii=False)


# -- judge ----------------------------------------------------------------------------------------------------
def judge_reply(model: str, messages: list[dict]) -> str:
    first = next(m["content"] for m in messages if m.get("role") == "user")
    q = re.search(r"^Question: (.*)$", first, re.M)
    a = re.search(r"^Answer: (.*)$", first, re.M)
    question, answer = (q.group(1) if q else ""), (a.group(1) if a else "")
    qn, an = len(question.split()), len(answer.split())
    scores = {
        "question_specificity": 3 if qn >= 10 else 2 if qn >= 7 else 1,
        "answer_sufficiency": 3 if an >= 8 else 2 if an >= 3 else 1,
        "answer_minimality": 3 if an <= 25 else 2 if an <= 50 else 1,
        "legal_relevance": 3 if re.search(r"\b(shall|may|means|right|penalty|registration|Act)\b", answer) else 2,
    }
    for c in scores:  # each judge disagrees now and then
        r = _h(model, question, answer, c) % 100
        if r < 12:
            scores[c] = max(1, scores[c] - 1)
        elif r < 20:
            scores[c] = min(3, scores[c] + 1)
    text = json.dumps(scores)
    return f"```json\n{text}\n```" if model.startswith("gemma") and _h(model, question) % 5 == 0 else text


# -- generation -----------------------------------------------------------------------------------------------
GENERATION_FAILURES = ("F1", "F2", "F3", "F4", "F5", "F6", "F8", "F9")


def _clause_spans(context: str) -> list[str]:
    "Clauses of the context usable as answers (5-300 characters, not numeric)."
    out = []
    for part in re.split(r"(?<=[;:.])\s+|\s(?=\((?:[a-z]{1,3}|\d{1,3})\)\s)", context):
        part = re.sub(r"^\((?:[a-z]{1,3}|\d{1,3}[A-Z]?)\)\s*", "", part.strip()).strip(" ,;:-")
        if (
            12 <= len(part) <= 300
            and part in context
            and not re.fullmatch(r"\W*\d{1,4}\W*", part)
            and not re.search(r"[\[\]]", part)
        ):
            out.append(part)
    return out


def _good_item(context: str, answer: str, k: int, section: str) -> dict:
    start = context.find(answer)
    before = content_tokens(context[max(0, start - 120) : start])[-3:] or content_tokens(context)[:3]
    topic = " ".join(before) or "the provision"
    templates = [
        "What does Section {s} provide regarding {t}?",
        "Under what condition does {t} apply?",
        "Which requirement concerns {t}?",
        "What is required concerning {t} under Section {s}?",
        "Who is responsible in respect of {t}?",
    ]
    return {
        "question": templates[k % len(templates)].format(t=topic, s=section),
        "answer": answer,
        "question_type": ["definition", "condition", "procedure", "power", "right"][k % 5],
    }


def _failing_item(kind: str, context: str, good: dict) -> dict | None:
    "A variant of a good item that fails filter `kind` (and passes the ones before it), or None if impossible."
    item = dict(good)
    if kind == "F1":
        item.pop("answer")
        return item
    if kind == "F2":
        item["answer"] = good["answer"].upper() + " in every case"
        return item
    if kind == "F3":
        item["answer"] = next((w for w in context.split() if 1 <= len(w.strip()) <= 3 and w in context), None)
        return item if item["answer"] else None
    if kind == "F4":
        cut = context[: int(len(context) * 0.9)]
        return dict(item, answer=cut) if 5 <= len(cut.strip()) <= 350 else None
    if kind == "F5":
        item["question"] = good["question"].rstrip("?")
        return item
    if kind == "F6":
        item["question"] = f"Which words state that {good['answer']}?"
        return item
    if kind == "F8":
        m = re.search(r"\b(of|the|to|in|and|or|a|an|by|for|with)\s+\1\b", context, re.I) or re.search(
            r"\[[^\]]{3,80}\]", context
        )
        return dict(item, answer=context[max(0, m.start() - 10) : m.end() + 10].strip()) if m else None
    if kind == "F9":
        m = next(
            (m for m in re.finditer(r"(?<!\S)[^\w\s]{0,2}\d{1,4}[^\w\s]{1,3}(?!\S)", context) if len(m.group()) >= 5),
            None,
        )
        return dict(item, answer=m.group()) if m else None
    return None


def generation_reply(model: str, messages: list[dict]) -> str:
    prompt = next(m["content"] for m in messages if m.get("role") == "user")
    m = re.search(r'Context:\n"""(.*)"""\s*\Z', prompt, re.S)
    context = m.group(1) if m else ""
    n = re.search(r"Generate up to (\d+) ", prompt)
    n = int(n.group(1)) if n else 5
    clauses = [c for c in _clause_spans(context) if len(c) < 0.8 * len(context)]
    sec = re.search(r"^Title: Section (\S+?):?\s", prompt, re.M)
    section = sec.group(1) if sec else "1"
    if not clauses:
        return json.dumps({"items": []})
    items = []
    for k in range(n):
        good = _good_item(context, clauses[(k * 7 + _h(context) % 5) % len(clauses)], k, section)
        r = _h(model, context, k) % 100
        bad = None
        if r < 24:  # about a quarter of the items fail a filter
            bad = _failing_item(GENERATION_FAILURES[r % len(GENERATION_FAILURES)], context, good)
        if k == 1 and len(context) <= 380:
            bad = _failing_item("F4", context, good)  # short contexts: one F4
        items.append(bad or good)
    return json.dumps({"items": items}, ensure_ascii=False)


def reply_for(model: str, messages: list[dict]) -> str:
    kind = request_kind(messages)
    if kind == "qa":
        return qa_reply(model, messages)
    if kind == "judge":
        return judge_reply(model, messages)
    if kind == "generation":
        return generation_reply(model, messages)
    return "{}"


def prompt_of(body: dict) -> str:
    "The user message of a chat request."
    return next(m["content"] for m in body["messages"] if m["role"] == "user")


def constant(text: str):
    "A reply function (`reply=`) that answers every request with `text`."
    return lambda body: text


def two_item_reply(body: dict) -> str:
    "A reply function (`reply=`) for generation prompts: two items whose answers are the first and last words of the context."
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


def prompt_hash(messages: list[dict]) -> str:
    return hashlib.sha256(json.dumps(messages, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


# -- the server -----------------------------------------------------------------------------------------------
class OpenAIStandIn(LoopbackServer):
    "Threaded OpenAI-compatible server on 127.0.0.1; a context manager with `.base_url` (`.../v1`)."

    def __init__(
        self,
        models=PAPER_MODELS,
        faults: Faults | None = None,
        api_key: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        script=(),
        reply=None,
        delay: float = 0.0,
        keep_requests: bool = True,
        authorization: str | None = None,
    ):
        self.models = list(models)
        self.faults = faults or Faults()
        self.api_key = api_key
        self.authorization = authorization  # the whole Authorization header every request must carry (e.g. "Basic ...")
        self.host, self.port = host, port
        self.script = list(script)  # the actions of the next chat requests (module docstring)
        self.reply = reply  # body -> message content; None: `reply_for` the request's kind
        self.delay = delay  # seconds before every chat reply
        self.keep_requests = keep_requests  # False for long runs (a dress rehearsal): `requests` stays empty
        self.requests: list[dict] = []  # every chat request: path, body, auth, t
        self.gets: list[str] = []  # the path of every GET request
        self.calls: Counter = Counter()  # (model, prompt hash) -> requests
        self.served: Counter = Counter()  # (model, prompt hash) -> successful replies
        self.kinds: Counter = Counter()  # (model, kind) -> successful replies
        self.fault_log: list[tuple[str, str, str]] = []
        self.in_flight = self.max_in_flight = 0
        self._lock = threading.Lock()

    def repeated(self) -> dict:
        "Requests answered successfully more than once (a resumed run should have none)."
        with self._lock:
            return {k: v for k, v in self.served.items() if v > 1}

    def models_doc(self) -> dict:
        return {
            "object": "list",
            "data": [{"id": m, "object": "model", "created": 0, "owned_by": "standin"} for m in self.models],
        }

    def __enter__(self):
        srv = self

        class Handler(JSONHandler):
            def _authorized(self) -> bool:
                if srv.authorization is not None:
                    if self.headers.get("Authorization") == srv.authorization:
                        return True
                elif srv.api_key is None or self.headers.get("Authorization") == f"Bearer {srv.api_key}":
                    return True
                self._send(401, error_body("Incorrect API key provided.", "invalid_api_key"))
                return False

            def do_GET(self):
                with srv._lock:
                    srv.gets.append(self.path)
                if not self._authorized():
                    return
                path = self.path.split("?")[0].rstrip("/")
                if path.endswith("/v1/models"):
                    return self._send(200, srv.models_doc())
                m = re.search(r"/v1/models/(.+)$", path)
                if m and m.group(1) in srv.models:
                    return self._send(200, {"id": m.group(1), "object": "model", "created": 0, "owned_by": "standin"})
                self._send(404, error_body(f"not found: {path}"))

            def _reply(self, native: bool, model: str, content: str, finish: str, key: tuple, messages: list):
                "A 200 chat reply in the shape of the API asked: OpenAI's, or Ollama's native one."
                if native:
                    return self._send(
                        200,
                        {
                            "model": model,
                            "created_at": "2025-01-01T00:00:00Z",
                            "message": {"role": "assistant", "content": content},
                            "done": True,
                            "done_reason": finish,
                        },
                    )
                self._send(
                    200,
                    {
                        "id": f"chatcmpl-{key[1][:16]}",
                        "object": "chat.completion",
                        "created": 0,
                        "model": model,
                        "system_fingerprint": "standin",
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": finish,
                                "logprobs": None,
                                "message": {"role": "assistant", "content": content},
                            }
                        ],
                        "usage": {
                            "prompt_tokens": sum(len(str(m.get("content", "")).split()) for m in messages),
                            "completion_tokens": len(content.split()),
                            "total_tokens": 0,
                        },
                    },
                )

            def do_POST(self):
                raw = self._read_body()
                if raw is None:
                    return  # cut off mid-request: never seen, like a real server
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    return self._send(400, error_body("We could not parse the JSON body of your request."))
                with srv._lock:
                    action = srv.script.pop(0) if srv.script else "ok"
                    if srv.keep_requests:
                        srv.requests.append(
                            {
                                "path": self.path,
                                "body": body,
                                "auth": self.headers.get("Authorization"),
                                "t": time.monotonic(),
                            }
                        )
                if not self._authorized():
                    return
                path = self.path.split("?")[0].rstrip("/")
                native = path.endswith("/api/chat")  # Ollama's native chat API
                if not (native or path.endswith("/chat/completions")):
                    return self._send(404, error_body(f"not found: {self.path}"))
                model, messages = body.get("model"), body.get("messages") or []
                if model not in srv.models:
                    if native:
                        return self._send(404, {"error": f"model '{model}' not found"})
                    return self._send(
                        404,
                        error_body(
                            f"The model `{model}` does not exist or you do not have access to it.",
                            "model_not_found",
                        ),
                    )
                key = (model, prompt_hash(messages))
                with srv._lock:
                    attempt = srv.calls[key]
                    srv.calls[key] += 1
                    srv.in_flight += 1
                    srv.max_in_flight = max(srv.max_in_flight, srv.in_flight)
                try:
                    if srv.delay:
                        time.sleep(srv.delay)
                    kind = action if isinstance(action, str) else action[0]
                    if kind == "status":
                        _, code, headers, payload = action
                        return self._send(code, payload, headers)
                    if kind == "sleep":
                        time.sleep(action[1])
                    fault = srv.faults.pick(f"{key[0]}|{key[1]}", attempt) if kind == "ok" else None
                    if fault:
                        srv.fault_log.append((model, key[1][:12], fault))
                    if fault == "429":
                        return self._send(
                            429,
                            error_body("Rate limit reached (stand-in).", "rate_limit_exceeded", "requests"),
                            {"Retry-After": f"{srv.faults.retry_after_s:g}"},
                        )
                    if fault == "500":
                        return self._send(500, error_body("The server had an error (stand-in).", None, "server_error"))
                    if fault == "timeout":
                        time.sleep(srv.faults.delay_s)
                    content = srv.reply(body) if srv.reply is not None else reply_for(model, messages)
                    finish = "stop"
                    if kind == "content":
                        content = action[1]
                    if kind == "finish":
                        content, finish = action[1], action[2]
                    if fault == "broken_json":
                        content = content[: max(1, len(content) // 2)]
                    with srv._lock:
                        srv.served[key] += 1
                        srv.kinds[(model, request_kind(messages))] += 1
                    self._reply(native, model, content, finish, key, messages)
                finally:
                    with srv._lock:
                        srv.in_flight -= 1

        self.base_url = f"http://{self.host}:{self._serve(Handler, self.host, self.port)}/v1"
        return self

    def summary(self) -> dict:
        """Requests, successful replies per model and kind, faults injected, peak concurrency, and how many requests
        that met a "timeout" fault the client asked again (it gave up waiting: a real client-side timeout)."""
        with self._lock:
            slow = {(m, h) for m, h, f in self.fault_log if f == "timeout"}
            asked_again = sum(1 for (m, h), n in self.calls.items() if (m, h[:12]) in slow and n > 1)
            return {
                "requests": sum(self.calls.values()),
                "served": sum(self.served.values()),
                "by_model_kind": {f"{m} {k}": n for (m, k), n in sorted(self.kinds.items())},
                "faults": dict(Counter(f for _, _, f in self.fault_log)),
                "max_in_flight": self.max_in_flight,
                "timeout_faults_asked_again": asked_again,
            }


def error_body(message: str, code: str | None = None, typ: str = "invalid_request_error") -> dict:
    "An OpenAI-style error payload."
    return {"error": {"message": message, "type": typ, "param": None, "code": code}}


if __name__ == "__main__":
    import argparse

    from .loopback import serve_from_command_line

    ap = argparse.ArgumentParser(description="OpenAI-compatible stand-in on 127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--fault-rate", type=float, default=0.0)
    args = ap.parse_args()
    serve_from_command_line(
        OpenAIStandIn(faults=Faults(rate=args.fault_rate), port=args.port),
        lambda s: f"INDICIPR_LLM_BASE_URL={s.base_url}  models: {', '.join(s.models)}",
    )
