"""The preflight's messages name causes, never secrets: what ``redact`` hides and keeps."""

from __future__ import annotations

from dlq_engine.job.preflight import redact, root_cause

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="dlq" password="S3cret-pw";'
CLIENT = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "PLAIN",
    "sasl.jaas.config": JAAS,
    "ssl.truststore.password": "changeit-123",
}


def test_redact_hides_a_whole_secret_value() -> None:
    assert redact(f"bad config: {JAAS}", CLIENT) == "bad config: [redacted]"


def test_redact_hides_the_quoted_parts_of_a_jaas_config() -> None:
    assert redact('login failed for password "S3cret-pw"', CLIENT) == 'login failed for password "[redacted]"'


def test_redact_hides_other_secret_properties() -> None:
    assert redact("keystore changeit-123 refused", CLIENT) == "keystore [redacted] refused"


def test_redact_keeps_settings_that_are_not_secret() -> None:
    text = "SASL_SSL with PLAIN: handshake failed"
    assert redact(text, CLIENT) == text
    assert redact(text, None) == text


def test_root_cause_of_a_plain_exception_is_its_first_line() -> None:
    assert root_cause(RuntimeError("first\nsecond")) == "first"
    assert root_cause(RuntimeError("")) == "RuntimeError"
