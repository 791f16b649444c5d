"""Conformance fixtures: from a surface's prose rules to checks over the store.

capability surface (YAML)
  -> derive.py   prose rules -> candidate fixtures (a small grammar)
  -> approve.py  the approval gate -> conformance_fixtures
  -> eval.py     assertion verdicts, as ClickHouse SQL and in Python
  -> check.py    fixtures over a window of events -> conformance_results
  -> suite.py    harness suites over recorded events (CI gates)
"""
