"""Make PydanticAI message histories for provrun's trace import tests.

Runs three small agents offline (PydanticAI's TestModel and FunctionModel, no network)
and prints one JSON object: {scenario name: the bytes of result.all_messages_json(),
as a string}. Used by crates/cli/tests/it/import_pydantic_ai.rs.
"""

import json
import sys

from pydantic import BaseModel
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel


def tools_run() -> bytes:
    agent = Agent(TestModel(), system_prompt="Be brief.")

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    return agent.run_sync("What is 2+3?").all_messages_json()


def retry_and_parallel_run() -> bytes:
    def model(messages, info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(
                parts=[
                    ToolCallPart("add", {"a": 2, "b": 3}, tool_call_id="c-add"),
                    ToolCallPart("lookup", '{"key": "missing"}', tool_call_id="c-look"),
                ]
            )
        return ModelResponse(parts=[TextPart("2+3 is 5; the key is missing.")])

    agent = Agent(FunctionModel(model))

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    @agent.tool_plain
    def lookup(key: str) -> str:
        """Look a key up."""
        raise ModelRetry(f"no such key: {key}")

    return agent.run_sync("Add 2 and 3, then look up 'missing'.").all_messages_json()


class City(BaseModel):
    name: str
    population: int


def structured_run() -> bytes:
    agent = Agent(TestModel(), output_type=City)
    return agent.run_sync("Name a city.").all_messages_json()


def main() -> None:
    out = {
        "tools": tools_run().decode(),
        "retry_and_parallel": retry_and_parallel_run().decode(),
        "structured": structured_run().decode(),
    }
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
