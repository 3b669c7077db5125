# Hindsight developer targets. `make demo` and `make test` install what they need first.
.PHONY: setup demo test lint format schemas docs

setup:
	scripts/setup.sh

demo: setup
	uv run hindsight demo $(ARGS)

test:
	scripts/setup.sh --test
	uv run pytest $(ARGS)

lint:
	uv run ruff check .
	uv run ruff format --check .
	uv run mypy

format:
	uv run ruff format .
	uv run ruff check --fix .

schemas:
	uv run hindsight schemas export --out docs/schemas

docs: schemas
	uv run faststream docs gen services.cli.asyncapi:create_docs_app --factory --yaml --out docs/asyncapi.yaml
