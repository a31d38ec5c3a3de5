"""Code extraction from LLM replies in every shape models produce."""

import ast

from lero.agents import extract_code
from lero.agents.extract import draft_from_reply
from tests.agents.samples import GOOD_MODULE, markdown_reply

HRF_ONLY = "import torch\n\n\ndef hybrid_reward(ctx):\n    return ctx.env_reward, {}\n"
OEF_ONLY = "import torch\n\n\ndef enhance_observation(obs):\n    return torch.cat([obs, obs[:, :1]], dim=-1)\n"


def defines_both(code: str) -> bool:
    names = {n.name for n in ast.parse(code).body if isinstance(n, ast.FunctionDef)}
    return {"hybrid_reward", "enhance_observation"} <= names


def test_python_fence_with_prose_around():
    assert extract_code(markdown_reply()) == GOOD_MODULE


def test_py_bare_and_tilde_fences():
    for opening, closing in [
        ("```py", "```"),
        ("```", "```"),
        ("~~~python", "~~~"),
        ("~~~", "~~~"),
        ("````python", "````"),
    ]:
        reply = f"Sure:\n{opening}\n{GOOD_MODULE}{closing}\nDone."
        assert extract_code(reply) == GOOD_MODULE, opening


def test_windows_line_endings():
    reply = markdown_reply().replace("\n", "\r\n")
    assert extract_code(reply) == GOOD_MODULE


def test_tab_indentation_is_normalised():
    tabbed = GOOD_MODULE.replace("    ", "\t")
    code = extract_code(f"```python\n{tabbed}```")
    assert code is not None and defines_both(code)


def test_unterminated_final_fence():
    reply = f"Here it is:\n```python\n{GOOD_MODULE}"
    assert extract_code(reply) == GOOD_MODULE


def test_block_defining_the_contract_wins_over_examples():
    reply = (
        "First the shapes:\n```python\nobs = torch.zeros(4, 12)\n```\n"
        f"The module:\n```python\n{GOOD_MODULE}```\n"
        "Usage:\n```bash\npython train.py\n```\n"
    )
    assert extract_code(reply) == GOOD_MODULE


def test_last_complete_block_wins():
    draft = GOOD_MODULE.replace("0.5 * team", "0.9 * team")
    reply = f"Draft:\n```python\n{draft}```\nImproved:\n```python\n{GOOD_MODULE}```"
    assert extract_code(reply) == GOOD_MODULE


def test_functions_split_across_blocks_are_merged():
    reply = f"Reward:\n```python\n{HRF_ONLY}```\nObservation:\n```python\n{OEF_ONLY}```\n"
    code = extract_code(reply)
    assert code is not None and defines_both(code)
    assert code.count("import torch") == 1


def test_example_call_block_is_not_merged():
    reply = f"```python\n{HRF_ONLY}```\n```python\n{OEF_ONLY}```\n```python\nreward, parts = hybrid_reward(ctx)\n```"
    code = extract_code(reply)
    assert code is not None and defines_both(code)
    assert "reward, parts" not in code


def test_malformed_code_is_returned_for_the_debugger():
    broken = "import torch\n\ndef hybrid_reward(ctx)\n    return ctx.env_reward, {}\n"
    assert extract_code(f"```python\n{broken}```") == broken


def test_bare_code_without_fences():
    assert extract_code(GOOD_MODULE) == GOOD_MODULE


def test_no_code_gives_none_and_a_draft_error():
    reply = "I cannot write this function without more information about the observation."
    assert extract_code(reply) is None
    draft = draft_from_reply(reply, "designer")
    assert draft.code is None and draft.error and draft.reply == reply


def test_non_python_block_only_when_nothing_else():
    assert extract_code('```json\n{"a": 1}\n```') == '{"a": 1}\n'
    assert extract_code("") is None
