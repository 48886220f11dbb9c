"""A Hugging Face hub stand-in on 127.0.0.1, selected by `HF_ENDPOINT`.

`HubStandIn({("dataset", "owner/name"): folder, ("model", "bert-base-uncased"): folder, ...})` serves local
folders as hub repositories, with exactly the endpoints `huggingface_hub`, `datasets` and `transformers` call
(found by running those clients against it, see `tests/test_standins.py`):

- repo info: `GET /api/{models|datasets}/{id}` and `.../revision/{rev}` (`sha`, `siblings`, ...);
- listing: `GET /api/{models|datasets}/{id}/tree/{rev}[/{path}]` (`recursive`), and
  `POST /api/{models|datasets}/{id}/paths-info/{rev}` (form or JSON `paths`);
- files: `HEAD|GET /{id}/resolve/{rev}/{path}` and `/datasets/{id}/resolve/{rev}/{path}` with `ETag`,
  `X-Repo-Commit`, `Content-Length`, `Accept-Ranges` and `Range` (206) support.

Revisions: `main` or the repo's commit sha (a deterministic hash of its files). Anything else is a 404 carrying the
hub's `X-Error-Code` (`RepoNotFound`, `RevisionNotFound`, `EntryNotFound`), so that clients raise the same
errors as against the real hub. Every request is logged in `requests` (method, path, status).

Faults, for the clients' failure paths: `faults={"data/x.jsonl": "redirect_loop"}` answers every download of that file
with a redirect to itself; `"cut_short"` announces the whole file and closes the connection halfway through it;
`"stall"` sends half of it and then nothing until the stand-in stops (a download to interrupt).
"""

from __future__ import annotations

import hashlib
import json
import threading
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from .loopback import LoopbackServer

LFS_SUFFIXES = (".safetensors", ".bin", ".pt", ".h5", ".msgpack", ".onnx", ".parquet")
LAST_MODIFIED = "2025-01-01T00:00:00.000Z"


def git_blob_sha1(data: bytes) -> str:
    "The git object id of a file's content (what the hub reports as `oid` / `blobId`)."
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class RepoFile:
    path: str
    local: Path
    size: int
    sha256: str
    blob: str

    @property
    def is_lfs(self) -> bool:
        return self.path.endswith(LFS_SUFFIXES)

    @property
    def etag(self) -> str:
        return self.sha256 if self.is_lfs else self.blob

    def entry(self) -> dict:
        "A tree / paths-info entry."
        out = {"type": "file", "oid": self.blob, "size": self.size, "path": self.path}
        if self.is_lfs:
            out["lfs"] = {"oid": self.sha256, "size": self.size, "pointerSize": 134}
        return out


@dataclass
class Repo:
    repo_type: str  # "model" | "dataset"
    repo_id: str
    folder: Path
    files: dict = field(default_factory=dict)  # path -> RepoFile
    sha: str = ""

    @classmethod
    def from_folder(cls, repo_type: str, repo_id: str, folder) -> "Repo":
        folder = Path(folder)
        if not folder.is_dir():
            raise FileNotFoundError(f"{folder}: no such folder to serve as {repo_type} {repo_id}")
        files = {}
        for p in sorted(folder.rglob("*")):
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts):
                data = p.read_bytes()
                rel = p.relative_to(folder).as_posix()
                files[rel] = RepoFile(rel, p, len(data), hashlib.sha256(data).hexdigest(), git_blob_sha1(data))
        digest = hashlib.sha1(json.dumps([[k, f.sha256] for k, f in files.items()]).encode()).hexdigest()
        return cls(repo_type, repo_id, folder, files, digest)

    def info(self, blobs: bool = False) -> dict:
        "The `/api/{models|datasets}/{id}` document."
        siblings = [
            {
                "rfilename": p,
                **(
                    {"size": f.size, "blobId": f.blob, **({"lfs": f.entry()["lfs"]} if f.is_lfs else {})}
                    if blobs
                    else {}
                ),
            }
            for p, f in self.files.items()
        ]
        doc = {
            "_id": self.sha[:24],
            "id": self.repo_id,
            "author": self.repo_id.split("/")[0] if "/" in self.repo_id else None,
            "sha": self.sha,
            "lastModified": LAST_MODIFIED,
            "createdAt": LAST_MODIFIED,
            "private": False,
            "gated": False,
            "disabled": False,
            "downloads": 0,
            "likes": 0,
            "tags": [],
            "siblings": siblings,
            "cardData": {},
            "usedStorage": sum(f.size for f in self.files.values()),
        }
        if self.repo_type == "model":
            doc.update({"modelId": self.repo_id, "library_name": "transformers", "pipeline_tag": None})
        else:
            doc.update({"description": "stand-in served by tests/standins/hub.py", "citation": ""})
        return doc

    def tree(self, path: str = "", recursive: bool = False) -> list[dict] | None:
        "Entries under `path` (None when `path` is neither a folder nor a file)."
        path = path.strip("/")
        if path in self.files:
            return [self.files[path].entry()]
        prefix = f"{path}/" if path else ""
        under = [p for p in self.files if p.startswith(prefix)]
        if not under:
            return None
        out, dirs = [], []
        for p in under:
            rest = p[len(prefix) :]
            if recursive or "/" not in rest:
                out.append(self.files[p].entry())
            top = rest.split("/")[0]
            if "/" in rest and f"{prefix}{top}" not in dirs:
                dirs.append(f"{prefix}{top}")
            if recursive:
                parts = rest.split("/")[:-1]
                for k in range(1, len(parts) + 1):
                    d = prefix + "/".join(parts[:k])
                    if d not in dirs:
                        dirs.append(d)
        if not recursive:
            dirs = [d for d in dirs if "/" not in d[len(prefix) :]]
        dir_entries = [
            {"type": "directory", "oid": hashlib.sha1(d.encode()).hexdigest(), "size": 0, "path": d} for d in dirs
        ]
        return sorted(dir_entries + out, key=lambda e: e["path"])


class HubStandIn(LoopbackServer):
    "A threaded HTTP server serving local folders as hub repos; use as a context manager (`.endpoint`)."

    def __init__(self, repos: dict, host: str = "127.0.0.1", port: int = 0, faults: dict | None = None):
        self.repos = {(t, rid): Repo.from_folder(t, rid, folder) for (t, rid), folder in repos.items()}
        self.faults = dict(faults or {})  # file path in its repo -> "redirect_loop" | "cut_short" | "stall"
        self.stopping = threading.Event()
        self.host, self.port = host, port
        self.requests: list[tuple[str, str, int]] = []
        self._lock = threading.Lock()

    # -- routing -------------------------------------------------------------------------------------------
    def _split_repo(self, repo_type: str, parts: list[str]) -> tuple[Repo | None, list[str]]:
        "The repo named by the first one or two path parts, and the rest."
        for n in (2, 1):
            rid = "/".join(parts[:n])
            if len(parts) >= n and (repo_type, rid) in self.repos:
                return self.repos[(repo_type, rid)], parts[n:]
        return None, parts

    def _revision_ok(self, repo: Repo, rev: str) -> bool:
        return urllib.parse.unquote(rev) in ("main", repo.sha)

    def handle(self, method: str, raw_path: str, body: bytes, headers) -> tuple[int, dict, bytes | Path, tuple | None]:
        "(status, headers, payload or file, byte range) for one request."
        url = urllib.parse.urlsplit(raw_path)
        query = urllib.parse.parse_qs(url.query)
        parts = [urllib.parse.unquote(p) for p in url.path.split("/") if p]
        if parts[:1] == ["api"] and len(parts) >= 3 and parts[1] in ("models", "datasets"):
            return self._api(method, parts[1][:-1], parts[2:], query, body, headers)
        repo_type = "model"
        if parts[:1] == ["datasets"]:
            repo_type, parts = "dataset", parts[1:]
        repo, rest = self._split_repo(repo_type, parts)
        if repo is None:
            return self._error(404, "RepoNotFound", f"Repository not found: {'/'.join(parts)}")
        if len(rest) < 3 or rest[0] != "resolve":
            return self._error(404, None, "Not Found")
        rev, path = rest[1], "/".join(rest[2:])
        if not self._revision_ok(repo, rev):
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
        f = repo.files.get(path)
        if f is None:
            return self._error(404, "EntryNotFound", f"Entry not found: {path}")
        if self.faults.get(path) == "redirect_loop" and method == "GET":
            return 302, {"Location": raw_path}, b"", None
        hdr = {
            "ETag": f'"{f.etag}"',
            "X-Repo-Commit": repo.sha,
            "Accept-Ranges": "bytes",
            "Content-Type": "application/octet-stream",
            "Content-Disposition": f'inline; filename="{Path(path).name}"',
        }
        rng = _parse_range(headers.get("Range"), f.size)
        if self.faults.get(path) in ("cut_short", "stall") and method == "GET":
            a = rng[0] if rng else 0
            return 200, hdr, f.local, (a, f.size - 1, self.faults[path])
        if rng is not None:
            a, b = rng
            if a >= f.size:
                return 416, {"Content-Range": f"bytes */{f.size}"}, b"", None
            hdr["Content-Range"] = f"bytes {a}-{b}/{f.size}"
            return 206, hdr, f.local, (a, b)
        return 200, hdr, f.local, None

    def _api(self, method, repo_type, parts, query, body, headers):
        repo, rest = self._split_repo(repo_type, parts)
        if repo is None:
            return self._error(404, "RepoNotFound", f"Repository not found: {'/'.join(parts)}")
        blobs = query.get("blobs", ["false"])[0].lower() == "true"
        if method == "GET" and not rest:
            return self._json(repo.info(blobs), repo)
        if method == "GET" and len(rest) == 2 and rest[0] == "revision":
            if not self._revision_ok(repo, rest[1]):
                return self._error(404, "RevisionNotFound", f"Invalid rev id: {rest[1]}")
            return self._json(repo.info(blobs), repo)
        if method == "GET" and len(rest) >= 2 and rest[0] == "tree":
            if not self._revision_ok(repo, rest[1]):
                return self._error(404, "RevisionNotFound", f"Invalid rev id: {rest[1]}")
            recursive = query.get("recursive", ["false"])[0].lower() in ("true", "1")
            entries = repo.tree("/".join(rest[2:]), recursive)
            if entries is None:
                return self._error(404, "EntryNotFound", f'{"/".join(rest[2:])} does not exist on "{rest[1]}"')
            return self._json(entries, repo)
        if method == "POST" and len(rest) == 2 and rest[0] == "paths-info":
            if not self._revision_ok(repo, rest[1]):
                return self._error(404, "RevisionNotFound", f"Invalid rev id: {rest[1]}")
            paths = _posted_paths(body, headers.get("Content-Type", ""))
            out = []
            for p in paths:
                p = p.strip("/")
                if p in repo.files:
                    out.append(repo.files[p].entry())
                elif any(f.startswith(p + "/") for f in repo.files) or p == "":
                    out.append({"type": "directory", "oid": hashlib.sha1(p.encode()).hexdigest(), "size": 0, "path": p})
            return self._json(out, repo)
        return self._error(
            404,
            None,
            f"not implemented by the hub stand-in: {method} /api/{repo_type}s/{repo.repo_id}/{'/'.join(rest)}",
        )

    @staticmethod
    def _json(obj, repo: Repo | None = None):
        hdr = {"Content-Type": "application/json; charset=utf-8"}
        if repo is not None:
            hdr["X-Repo-Commit"] = repo.sha
        return 200, hdr, json.dumps(obj).encode(), None

    @staticmethod
    def _error(status: int, code: str | None, message: str):
        hdr = {"Content-Type": "application/json; charset=utf-8", "X-Error-Message": message}
        if code:
            hdr["X-Error-Code"] = code
        return status, hdr, json.dumps({"error": message}).encode(), None

    # -- server life cycle ---------------------------------------------------------------------------------
    def __enter__(self):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _serve(self, method):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                try:
                    status, hdr, payload, rng = hub.handle(method, self.path, body, self.headers)
                except Exception as e:  # a bug in the stand-in: say so, do not hang the client
                    status, hdr, payload, rng = (
                        500,
                        {"Content-Type": "text/plain"},
                        f"hub stand-in error: {e!r}".encode(),
                        None,
                    )
                with hub._lock:
                    hub.requests.append((method, self.path, status))
                cut = rng is not None and rng[2:] in (("cut_short",), ("stall",))
                if isinstance(payload, Path):
                    a, b = rng[:2] if rng else (0, payload.stat().st_size - 1)
                    length = max(0, b - a + 1)
                else:
                    length = len(payload)
                try:
                    self.send_response(status)
                    for k, v in hdr.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(length))
                    self.end_headers()
                    if method == "HEAD":
                        return
                    if isinstance(payload, Path):
                        with open(payload, "rb") as f:
                            f.seek(a)
                            left = length // 2 if cut else length
                            while left > 0:
                                chunk = f.read(min(1 << 20, left))
                                if not chunk:
                                    break
                                self.wfile.write(chunk)
                                left -= len(chunk)
                    else:
                        self.wfile.write(payload)
                    if cut:  # the rest never comes: the connection ends short of its Content-Length
                        self.wfile.flush()
                        if rng[2] == "stall":
                            hub.stopping.wait(120)
                        self.close_connection = True
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_GET(self):
                self._serve("GET")

            def do_HEAD(self):
                self._serve("HEAD")

            def do_POST(self):
                self._serve("POST")

        self.endpoint = f"http://{self.host}:{self._serve(Handler, self.host, self.port)}"
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        super().__exit__(*exc)

    def paths_seen(self) -> list[str]:
        "Request lines (`METHOD path -> status`) seen so far."
        with self._lock:
            return [f"{m} {p} -> {s}" for m, p, s in self.requests]


def _parse_range(value: str | None, size: int) -> tuple[int, int] | None:
    "`(first, last)` byte of a single `bytes=a-b` / `bytes=a-` / `bytes=-n` range, else None."
    if not value or not value.startswith("bytes=") or "," in value:
        return None
    a, _, b = value[len("bytes=") :].partition("-")
    try:
        if a == "":
            n = int(b)
            return max(0, size - n), size - 1
        return int(a), min(int(b), size - 1) if b else size - 1
    except ValueError:
        return None


def _posted_paths(body: bytes, content_type: str) -> list[str]:
    "The `paths` of a paths-info request (form-encoded, repeated or comma-free, or JSON)."
    text = body.decode("utf-8", "replace")
    if "json" in content_type:
        try:
            obj = json.loads(text or "{}")
        except json.JSONDecodeError:
            return []
        paths = obj.get("paths", [])
        return [paths] if isinstance(paths, str) else list(paths)
    return urllib.parse.parse_qs(text).get("paths", [])


def serve_folders(root, host: str = "127.0.0.1", port: int = 0, faults: dict | None = None) -> HubStandIn:
    "A stand-in for `<root>/datasets/<owner>/<name>/` and `<root>/models/[<owner>/]<name>/` (a folder with config.json)."
    root = Path(root)
    repos = {}
    if (root / "datasets").is_dir():
        for folder in sorted((root / "datasets").glob("*/*")):
            if folder.is_dir():
                repos[("dataset", folder.relative_to(root / "datasets").as_posix())] = folder
    if (root / "models").is_dir():
        for cfg in sorted((root / "models").rglob("config.json")):
            repos[("model", cfg.parent.relative_to(root / "models").as_posix())] = cfg.parent
    return HubStandIn(repos, host, port, faults)


if __name__ == "__main__":
    import argparse

    from .loopback import serve_from_command_line

    ap = argparse.ArgumentParser(description="serve <root>/datasets/... and <root>/models/... as a hub on 127.0.0.1")
    ap.add_argument("root")
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    serve_from_command_line(
        serve_folders(args.root, port=args.port),
        lambda hub: f"HF_ENDPOINT={hub.endpoint}  repos: {', '.join(f'{t}:{r}' for t, r in hub.repos)}",
    )
