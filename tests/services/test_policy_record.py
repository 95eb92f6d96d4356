"""``spec_approval_pin``: a recorded spec's ``approval`` pin, read without the spec reader when the text cannot name
one (``certa show`` then imports neither YAML nor ``certa.engine.core.spec``: tests/cli/test_startup.py), and read
by it whenever it may, an escaped key included."""

from __future__ import annotations

import pytest

from certa.engine.core.spec import approval_pin
from certa.engine.foundation.errors import SpecError
from certa.engine.services.policy_record import spec_approval_pin

DIGEST = "ab" * 32
PLAIN = "certa: 1\nname: x\nseed: 1\nstages: []\n"


@pytest.mark.parametrize("key", ["approval", "'approval'", '"approval"', '"\\x61pproval"', '"appr\\u006fval"',
                                 "!!str approval"])
def test_every_spelling_of_the_key_is_read(key: str) -> None:
    text = PLAIN + f"{key}: {{policy: approvers.yaml, sha256: {DIGEST}}}\n"
    pin = spec_approval_pin(text, "spec")
    assert pin is not None and (pin.policy, pin.sha256, pin.path) == ("approvers.yaml", DIGEST, None)
    assert pin == approval_pin(text, "spec")


def test_a_text_that_cannot_name_it_has_no_pin_without_being_parsed() -> None:
    assert spec_approval_pin(PLAIN, "spec") is None
    assert spec_approval_pin("{not yaml: [", "spec") is None   # not parsed: no key 'approval' can stand in it
    with pytest.raises(SpecError):                              # parsed (it may name one), so refused as before
        spec_approval_pin("{not yaml: [ approval", "spec")
    assert spec_approval_pin(PLAIN + "description: 'C:\\\\models'\n", "spec") is None  # a backslash: parsed, none
