.PHONY: test lint format bench

test:
	pip install -e '.[test]' && python -m pytest

lint:
	ruff format --check . && ruff check . && mypy

format:
	ruff format . && ruff check --fix .

bench:
	python -m bench.run
