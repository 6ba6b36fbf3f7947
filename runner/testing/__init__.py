"""Fakes for tests and benchmarks, shipped so benchmarks and users' own tests can import them.

- ``fake_anthropic``: a scripted fake of the Messages API on 127.0.0.1 (streaming, faults, rate limits, prompt
  caching, Message Batches), spoken to by the real ``anthropic`` SDK and the real Claude Code CLI.
- ``fake_openai``: a scripted fake of the OpenAI Responses API on 127.0.0.1 (streaming, function calls, faults),
  spoken to by the real Codex CLI; ``fake_gemini``: the Gemini API's, spoken to by the real Gemini CLI.
- ``scripted``: what those three fakes share (a script's turns and faults, the server and handler plumbing).
- ``fake_judge``: scripted judge replies for that fake (they answer the rubric ids each judge request holds).
- ``fake_github``: a fake GitHub REST API on 127.0.0.1 for PyGithub, holding every request to GitHub's own OpenAPI
  description (``github_contract``, the vendored subset in ``contracts/``), so no test passes on a request real
  GitHub would refuse.
- ``virtual_clock``: a clock for asyncio code that takes ``clock=`` / ``sleep=`` (the rate limiter): time moves only
  when every task waits on it, so tests assert exact times whatever the machine's load.

Why a package and not files under tests/: the benchmarks measure against the same fakes, and a benchmark that
imports from ``tests.`` only runs from a checkout. The fakes use the standard library (and jsonschema, a runtime
dependency, for the GitHub contract); none imports a test framework, so importing them costs no pytest.
"""
