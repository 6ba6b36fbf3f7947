"""A fake GitHub REST API on 127.0.0.1 for the publish tests (stdlib only: ThreadingHTTPServer in a thread).

It answers just what PyGithub 2.x (measured with 2.10.0, `Github(..., lazy=True)`) sends for
runner.publish.github.publish, checked against PyGithub's source (Repository.create_check_run, Commit.get_check_runs,
CheckRun.edit / get_annotations, Issue.get_comments / create_comment, IssueComment.edit):

- GET   /repos/{o}/{r}/commits/{sha}/check-runs?check_name=..&filter=all&per_page=100[&app_id=..]
        -> {"total_count", "check_runs": [...]}   (Commit.get_check_runs; no Link header = one page), newest first
- POST  /repos/{o}/{r}/check-runs                 -> 201 check run   (Repository.create_check_run)
- GET / PATCH /repos/{o}/{r}/check-runs/{id}     -> check run       (CheckRun.edit PATCHes the run's `url`)
- GET   /repos/{o}/{r}/check-runs/{id}/annotations?per_page=100 -> [annotation, ...] (CheckRun.get_annotations)
- GET   /repos/{o}/{r}/issues/{n}/comments?per_page=100 -> [comment, ...]  (Issue.get_comments)
- POST  /repos/{o}/{r}/issues/{n}/comments        -> 201 comment     (Issue.create_comment)
- GET / PATCH /repos/{o}/{r}/issues/comments/{id} -> comment         (IssueComment.edit PATCHes the comment's `url`)
- GET   /repos/{o}/{r}/pulls/{n}/files?per_page=100 -> [file, ...]  (PullRequest.get_files; `add_pull_file` seeds them)
- GET / POST /repos/{o}/{r}/pulls/{n}/comments   -> review comments (PullRequest.get_review_comments /
        create_review_comment); a POST whose `line` (and `start_line`) is not a RIGHT-side line of one hunk of the
        file's patch is refused with 422, as GitHub refuses a line comment outside the pull request's diff
- GET / PATCH /repos/{o}/{r}/pulls/comments/{id}  -> review comment (PullRequestComment.edit PATCHes its `url`)
- GET   /repos/{o}/{r}, /repos/{o}/{r}/commits/{sha}, /repos/{o}/{r}/issues/{n}, /repos/{o}/{r}/pulls/{n}
        (only fetched by a non-lazy client; answered for completeness)

PyGithub turns every absolute `url` in a response into a path on its base_url, so the objects' `url`
fields must point at this server. Annotations are appended on every update of a check run, as on GitHub.
Every check run carries the `app` that made it (`app_id`: the token's app; `add_check_run(app_id=...)` seeds
another's), and a PATCH of another app's check run is answered 403 "Invalid app_id ... can only be modified by
the GitHub App that created it", as GitHub answers it.

GitHub's contract, on every request (runner/testing/github_contract.py): the Authorization header (`token <t>`, 401
"Bad credentials" otherwise); a method and path that is an operation of GitHub's own OpenAPI description
(the vendored subset; 404 otherwise); its path and query parameters and its JSON body valid against that
description, and within the limits GitHub enforces beyond it (65,535 UTF-8 bytes for output.summary,
output.text and a comment body, 50 annotations per request): 422 "Validation Failed" in GitHub's error shape
otherwise, 400 for a body that is not JSON. A refused request is kept in `rejected`, and a FakeGitHub that
refused one fails the test when it closes, unless the test set `expect_rejections`: publish turns GitHub's
refusals into notes, and no test may pass on a request real GitHub would refuse.

`deny_writes = 403` (or 404) answers every POST/PATCH the way GitHub answers a fork's read-only token
(`deny_only="/comments"` limits that to the paths containing it). Every request is recorded (method, path,
query, headers, JSON body).

Usage::

    with FakeGitHub(token="t0k3n") as gh:
        ctx = Context(api_url=gh.url, repository=gh.repository, ...)
        ...
        gh.requests, gh.check_runs, gh.annotations, gh.comments
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from runner.testing import github_contract

STAMP = "2026-11-30T12:00:00Z"


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    raw: str
    body: Any = None


@dataclass
class FakeGitHub:
    token: str | None = None
    repository: str = "acme/skills"
    deny_writes: int | None = None
    deny_only: str | None = None  # with deny_writes: refuse only writes whose path contains this ("/comments")
    requests: list[Recorded] = field(default_factory=list)
    check_runs: dict[int, dict[str, Any]] = field(default_factory=dict)
    annotations: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    comments: dict[int, dict[str, Any]] = field(default_factory=dict)
    pull_files: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # PR number -> its changed files
    review_comments: dict[int, dict[str, Any]] = field(default_factory=dict)
    rejected: list[tuple[Recorded, Any]] = field(default_factory=list)  # (request, GitHub's answer) refused
    expect_rejections: bool = False  # a test that sends refused requests on purpose
    app_id: int = 15368  # the GitHub App the token belongs to (15368: github-actions, whose app GITHUB_TOKEN is)
    _next: int = 1000

    # ---- lifecycle ------------------------------------------------------------------------------

    def __enter__(self) -> FakeGitHub:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def handle_any(self) -> None:
                fake._handle(self)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = handle_any

        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
        if exc_type is None and self.rejected and not self.expect_rejections:
            shown = "; ".join(f"{r.method} {r.path}: {json.dumps(answer)[:400]}" for r, answer in self.rejected[:5])
            raise AssertionError(f"the fake GitHub refused {len(self.rejected)} request(s) real GitHub would refuse "
                                 f"(its OpenAPI contract): {shown}")

    @property
    def url(self) -> str:
        host, port = self._server.socket.getsockname()[:2]  # an AF_INET address: (str, int), never bytes
        return f"http://{host}:{port}"

    # ---- seeding and queries -------------------------------------------------------------------------

    def new_id(self) -> int:
        self._next += 1
        return self._next

    def add_comment(self, number: int, body: str, login: str = "someone", kind: str = "User") -> dict[str, Any]:
        """A comment already on the PR (someone else's, or an earlier report)."""
        cid = self.new_id()
        self.comments[cid] = self._comment_json(cid, number, body, login, kind)
        return self.comments[cid]

    def add_check_run(self, sha: str, name: str, external_id: str | None = None, app_id: int | None = None,
                      **fields: Any) -> dict[str, Any]:
        """A check run already on a commit (e.g. the workflow job's own, which can share a name). `app_id`: the
        GitHub App that made it (default: the token's); only that app may change it, as on GitHub. `fields`: more
        of the check run's JSON (status, conclusion, output)."""
        rid = self.new_id()
        data = {"name": name, "head_sha": sha, "external_id": external_id, "status": "in_progress", **fields}
        self.check_runs[rid] = self._check_run_json(rid, data, self.app_id if app_id is None else app_id)
        self.annotations[rid] = []
        return self.check_runs[rid]

    def add_pull_file(self, number: int, filename: str, patch: str | None, status: str = "modified") -> None:
        """A file the pull request changes, with its unified-diff `patch` (None: GitHub left it out, a big diff)."""
        entry = {"sha": "f" * 40, "filename": filename, "status": status, "additions": patch.count("\n+") if patch else 0,
                 "deletions": patch.count("\n-") if patch else 0, "changes": 0,
                 "blob_url": f"https://github.com/{self.repository}/blob/x/{filename}",
                 "raw_url": f"https://github.com/{self.repository}/raw/x/{filename}",
                 "contents_url": f"{self.url}/repos/{self.repository}/contents/{filename}"}
        if patch is not None:
            entry["patch"] = patch
        self.pull_files.setdefault(number, []).append(entry)

    def add_review_comment(self, number: int, body: str, path: str, line: int, login: str = "someone",
                           kind: str = "User") -> dict[str, Any]:
        """A review comment already on the PR (a reviewer's)."""
        cid = self.new_id()
        self.review_comments[cid] = self._review_comment_json(cid, number, {"body": body, "path": path, "line": line,
                                                                            "commit_id": "0" * 40}, login, kind)
        return self.review_comments[cid]

    def review_comments_on(self, number: int) -> list[dict[str, Any]]:
        return [c for c in self.review_comments.values() if c["_pull"] == number]

    def writes(self) -> list[Recorded]:
        return [r for r in self.requests if r.method in ("POST", "PATCH", "PUT", "DELETE")]

    def comments_on(self, number: int) -> list[dict[str, Any]]:
        return [c for c in self.comments.values() if c["_issue"] == number]

    # ---- JSON shapes -------------------------------------------------------------------------------------

    def _repo_json(self) -> dict[str, Any]:
        owner, name = self.repository.split("/")
        base = f"{self.url}/repos/{self.repository}"
        return {"id": 4242, "node_id": "R_kgDOfake", "name": name, "full_name": self.repository, "private": False,
                "owner": self._user_json(owner, "Organization"), "html_url": f"https://github.com/{self.repository}",
                "url": base, "default_branch": "main", "fork": False,
                "issues_url": base + "/issues{/number}", "pulls_url": base + "/pulls{/number}"}

    def _user_json(self, login: str, kind: str = "User") -> dict[str, Any]:
        return {"login": login, "id": abs(hash(login)) % 100_000, "type": kind, "url": f"{self.url}/users/{login}",
                "html_url": f"https://github.com/{login}"}

    def _check_run_json(self, rid: int, data: dict[str, Any], app_id: int | None = None) -> dict[str, Any]:
        base = f"{self.url}/repos/{self.repository}"
        output = data.get("output") or {}
        return {"id": rid, "node_id": f"CR_{rid}", "name": data["name"], "head_sha": data["head_sha"],
                "external_id": data.get("external_id"), "status": data.get("status") or "queued",
                "conclusion": data.get("conclusion"), "started_at": data.get("started_at") or STAMP,
                "completed_at": data.get("completed_at"),
                "details_url": data.get("details_url") or f"https://github.com/{self.repository}/runs/{rid}",
                "url": f"{base}/check-runs/{rid}", "html_url": f"https://github.com/{self.repository}/runs/{rid}",
                "output": {"title": output.get("title"), "summary": output.get("summary"),
                           "text": output.get("text"), "annotations_count": 0,
                           "annotations_url": f"{base}/check-runs/{rid}/annotations"},
                "check_suite": {"id": 9000 + rid}, "app": self._app_json(self.app_id if app_id is None else app_id),
                "pull_requests": []}

    @staticmethod
    def _app_json(app_id: int) -> dict[str, Any]:
        if app_id == 15368:
            return {"id": 15368, "slug": "github-actions", "name": "GitHub Actions"}
        return {"id": app_id, "slug": f"app-{app_id}", "name": f"App {app_id}"}

    def _comment_json(self, cid: int, number: int, body: str, login: str = "github-actions[bot]",
                      kind: str = "Bot") -> dict[str, Any]:
        base = f"{self.url}/repos/{self.repository}"
        return {"id": cid, "node_id": f"IC_{cid}", "body": body, "user": self._user_json(login, kind),
                "url": f"{base}/issues/comments/{cid}", "issue_url": f"{base}/issues/{number}",
                "html_url": f"https://github.com/{self.repository}/pull/{number}#issuecomment-{cid}",
                "created_at": STAMP, "updated_at": STAMP, "author_association": "NONE", "_issue": number}

    def _review_comment_json(self, cid: int, number: int, data: dict[str, Any], login: str = "github-actions[bot]",
                             kind: str = "Bot") -> dict[str, Any]:
        base = f"{self.url}/repos/{self.repository}"
        line = data.get("line")
        return {"id": cid, "node_id": f"PRRC_{cid}", "pull_request_review_id": 5000 + cid, "body": data["body"],
                "path": data["path"], "line": line, "original_line": line, "start_line": data.get("start_line"),
                "original_start_line": data.get("start_line"), "side": data.get("side") or "RIGHT",
                "start_side": data.get("start_side"), "commit_id": data["commit_id"],
                "original_commit_id": data["commit_id"], "diff_hunk": "@@ fake @@", "position": 1,
                "original_position": 1, "subject_type": data.get("subject_type") or "line",
                "user": self._user_json(login, kind), "url": f"{base}/pulls/comments/{cid}",
                "html_url": f"https://github.com/{self.repository}/pull/{number}#discussion_r{cid}",
                "pull_request_url": f"{base}/pulls/{number}", "created_at": STAMP, "updated_at": STAMP,
                "author_association": "NONE", "_pull": number}

    def _diff_problem(self, number: int, data: dict[str, Any]) -> dict[str, str] | None:
        """What GitHub says of a line comment outside the pull request's diff (None: the lines are in one hunk)."""
        resource = "PullRequestReviewComment"
        found = next((f for f in self.pull_files.get(number, []) if f["filename"] == data["path"]), None)
        if found is None:
            return {"resource": resource, "code": "invalid", "field": "pull_request_review_thread.path",
                    "message": "pull_request_review_thread.path is invalid"}
        line, start = data.get("line"), data.get("start_line") or data.get("line")
        if data.get("side", "RIGHT") != "RIGHT" or not isinstance(line, int) or not isinstance(start, int):
            return None  # only RIGHT-side line comments are modelled; the schema check covers the types
        for first, last in right_hunks(found.get("patch") or ""):
            if first <= line <= last:
                if first <= start <= line:
                    return None
                return {"resource": resource, "code": "invalid", "field": "pull_request_review_thread.start_line",
                        "message": "pull_request_review_thread.start_line must be part of the same hunk as the line."}
        return {"resource": resource, "code": "invalid", "field": "pull_request_review_thread.line",
                "message": "pull_request_review_thread.line must be part of the diff"}

    def _public(self, item: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in item.items() if not k.startswith("_")}

    # ---- dispatch ----------------------------------------------------------------------------------------

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(handler.path)
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length).decode("utf-8") if length else ""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        record = Recorded(handler.command, parts.path, parse_qs(parts.query), dict(handler.headers.items()), raw, body)
        try:
            with self._lock:
                self.requests.append(record)
                status, payload = self._route(record)
        except Exception as exc:  # a bug in the fake shows up as a 500 with the reason
            status, payload = 500, {"message": f"fake error: {exc!r}"}
        data = json.dumps(payload).encode("utf-8")
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json; charset=utf-8")
        handler.send_header("Content-Length", str(len(data)))
        handler.send_header("X-RateLimit-Remaining", "4999")
        handler.end_headers()
        handler.wfile.write(data)

    def _route(self, req: Recorded) -> tuple[int, Any]:
        if self.token is not None and req.headers.get("Authorization") != f"token {self.token}":
            return 401, {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest",
                         "status": "401"}
        prefix = f"/repos/{self.repository}"
        if not req.path.startswith(prefix):
            return self._not_found()
        rest = req.path[len(prefix):]
        if req.raw and req.body is None and req.raw.strip() != "null":
            answer = {"message": "Problems parsing JSON", "documentation_url": "https://docs.github.com/rest",
                      "status": "400"}
            self.rejected.append((req, answer))
            return 400, answer
        operation, errors = github_contract.load().check(req.method, req.path, req.query, req.raw)
        if operation is None:
            self.rejected.append((req, "no such operation in GitHub's REST description"))
            return self._not_found()
        write = req.method in ("POST", "PATCH", "PUT", "DELETE")
        if write and self.deny_writes and (self.deny_only is None or self.deny_only in req.path):
            if self.deny_writes == 404:
                return self._not_found()
            return self.deny_writes, {"message": "Resource not accessible by integration",
                                      "documentation_url": "https://docs.github.com/rest", "status": "403"}
        if errors:
            answer = github_contract.validation_failed(errors)
            self.rejected.append((req, answer))
            return 422, answer
        m = re.fullmatch
        if rest == "" and req.method == "GET":
            return 200, self._repo_json()
        if (g := m(r"/commits/([^/]+)/check-runs", rest)) and req.method == "GET":
            names = req.query.get("check_name")
            name = names[0] if names else None
            apps = req.query.get("app_id")
            runs = [r for r in self.check_runs.values()
                    if r["head_sha"] == g.group(1) and (name is None or r["name"] == name)
                    and (not apps or str(r["app"]["id"]) == apps[0])]
            runs.sort(key=lambda r: -r["id"])
            return 200, {"total_count": len(runs), "check_runs": runs}
        if (g := m(r"/commits/([^/]+)", rest)) and req.method == "GET":
            return 200, {"sha": g.group(1), "url": f"{self.url}{prefix}/commits/{g.group(1)}",
                         "html_url": f"https://github.com/{self.repository}/commit/{g.group(1)}",
                         "commit": {"message": "fake"}, "files": [], "parents": []}
        if rest == "/check-runs" and req.method == "POST":
            data = req.body or {}
            rid = self.new_id()
            self.check_runs[rid] = self._check_run_json(rid, data)
            self.annotations[rid] = []
            self._append(rid, data.get("output"))
            return 201, self.check_runs[rid]
        if g := m(r"/check-runs/(\d+)/annotations", rest):
            rid = int(g.group(1))
            if rid not in self.check_runs:
                return self._not_found()
            return 200, [{**a, "blob_href": f"https://github.com/{self.repository}/blob/x/{a['path']}",
                          "start_column": None, "end_column": None, "raw_details": a.get("raw_details")}
                         for a in self.annotations[rid]]
        if g := m(r"/check-runs/(\d+)", rest):
            rid = int(g.group(1))
            if rid not in self.check_runs:
                return self._not_found()
            if req.method == "PATCH":
                data = req.body or {}
                run = self.check_runs[rid]
                if run["app"]["id"] != self.app_id:  # GitHub's answer, word for word
                    return 403, {"message": f"Invalid app_id `{self.app_id}` - check run can only be modified by "
                                            "the GitHub App that created it.",
                                 "documentation_url": "https://docs.github.com/rest/checks/runs#update-a-check-run",
                                 "status": "403"}
                for key in ("name", "status", "conclusion", "started_at", "completed_at", "details_url", "external_id"):
                    if key in data:
                        run[key] = data[key]
                if "output" in data:
                    out = data["output"]
                    run["output"].update({k: out.get(k) for k in ("title", "summary", "text") if k in out})
                self._append(rid, data.get("output"))
            return 200, self.check_runs[rid]
        if g := m(r"/issues/(\d+)/comments", rest):
            number = int(g.group(1))
            if req.method == "GET":
                return 200, [self._public(c) for c in sorted(self.comments_on(number), key=lambda c: c["id"])]
            if req.method == "POST":
                body = req.body["body"]
                cid = self.new_id()
                self.comments[cid] = self._comment_json(cid, number, body)
                return 201, self._public(self.comments[cid])
        if g := m(r"/issues/comments/(\d+)", rest):
            cid = int(g.group(1))
            if cid not in self.comments:
                return self._not_found()
            if req.method == "PATCH":
                self.comments[cid]["body"] = req.body["body"]
                self.comments[cid]["updated_at"] = "2026-11-30T12:05:00Z"
            return 200, self._public(self.comments[cid])
        if (g := m(r"/pulls/(\d+)/files", rest)) and req.method == "GET":
            return 200, self.pull_files.get(int(g.group(1)), [])
        if g := m(r"/pulls/(\d+)/comments", rest):
            number = int(g.group(1))
            if req.method == "GET":
                return 200, [self._public(c) for c in sorted(self.review_comments_on(number), key=lambda c: c["id"])]
            if req.method == "POST":
                problem = self._diff_problem(number, req.body)
                if problem is not None:
                    answer = github_contract.validation_failed([problem])
                    self.rejected.append((req, answer))
                    return 422, answer
                cid = self.new_id()
                self.review_comments[cid] = self._review_comment_json(cid, number, req.body)
                return 201, self._public(self.review_comments[cid])
        if g := m(r"/pulls/comments/(\d+)", rest):
            cid = int(g.group(1))
            if cid not in self.review_comments:
                return self._not_found()
            if req.method == "PATCH":
                self.review_comments[cid]["body"] = req.body["body"]
                self.review_comments[cid]["updated_at"] = "2026-11-30T12:05:00Z"
            return 200, self._public(self.review_comments[cid])
        if (g := m(r"/(issues|pulls)/(\d+)", rest)) and req.method == "GET":
            number = int(g.group(2))
            base = f"{self.url}{prefix}"
            item = {"id": 70000 + number, "number": number, "state": "open", "title": "A change",
                    "url": f"{base}/{g.group(1)}/{number}", "comments_url": f"{base}/issues/{number}/comments",
                    "html_url": f"https://github.com/{self.repository}/pull/{number}",
                    "user": self._user_json("author")}
            if g.group(1) == "issues":
                item["pull_request"] = {"url": f"{base}/pulls/{number}"}
            return 200, item
        return self._not_found()

    def _append(self, rid: int, output: Any) -> None:
        if not isinstance(output, dict):
            return
        self.annotations[rid].extend(output.get("annotations") or [])
        self.check_runs[rid]["output"]["annotations_count"] = len(self.annotations[rid])

    @staticmethod
    def _not_found() -> tuple[int, dict[str, Any]]:
        return 404, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest", "status": "404"}


_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", re.MULTILINE)


def right_hunks(patch: str) -> list[tuple[int, int]]:
    """(first, last) new-file lines of each hunk of a unified-diff patch: the RIGHT-side lines GitHub takes a line
    comment on (added and context lines; a hunk's new-side lines are contiguous)."""
    spans = []
    for found in _HUNK.finditer(patch):
        start, count = int(found.group(1)), int(found.group(2) or "1")
        if count:
            spans.append((start, start + count - 1))
    return spans
