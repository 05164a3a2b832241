from __future__ import annotations

import pytest

from rag.errors import ConfigError
from rag.settings import Settings, settings_table
from tests.conftest import PROJECT_ROOT


def test_readme_settings_table_matches_settings():
    readme = (PROJECT_ROOT / "README.md").read_text()
    block = readme.split("<!-- settings-table:start -->")[1].split("<!-- settings-table:end -->")[0]
    assert block.strip() == settings_table().strip(), "run `python -m rag.settings` and paste it into README.md"


def test_every_field_has_a_description():
    assert all(field.description for field in Settings.model_fields.values())


def test_env_prefix_and_openai_fallbacks(settings_factory, monkeypatch):
    monkeypatch.setenv("PAPERCHAT_TOP_K", "7")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1/")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    settings = settings_factory()
    assert settings.top_k == 7
    assert settings.llm_base_url == "http://127.0.0.1:9/v1"
    assert settings.llm_api_key.get_secret_value() == "sk-x" and "sk-x" not in repr(settings)


def test_paperchat_variable_wins_over_openai(settings_factory, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    monkeypatch.setenv("PAPERCHAT_LLM_BASE_URL", "http://127.0.0.1:2/v1")
    assert settings_factory().llm_base_url == "http://127.0.0.1:2/v1"


@pytest.mark.parametrize(("name", "value", "fragment"), [
    ("PAPERCHAT_TOP_K", "zero", "PAPERCHAT_TOP_K"),
    ("PAPERCHAT_TOP_K", "0", "PAPERCHAT_TOP_K"),
    ("PAPERCHAT_LLM_BASE_URL", "localhost:8080", "http://"),
    ("PAPERCHAT_AUTH", "nopassword", "user:password"),
    ("PAPERCHAT_LLM", "gpt", "PAPERCHAT_LLM"),
    ("PAPERCHAT_COLLECTION", "a b", "PAPERCHAT_COLLECTION"),
    ("PAPERCHAT_API_MAX_CONCURRENT", "0", "PAPERCHAT_API_MAX_CONCURRENT"),
    ("PAPERCHAT_API_MAX_BODY_BYTES", "10", "PAPERCHAT_API_MAX_BODY_BYTES"),
])
def test_bad_values_are_config_errors(settings_factory, monkeypatch, name, value, fragment):
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as info:
        settings_factory()
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_unknown_override_is_rejected(settings_factory):
    with pytest.raises(ConfigError):
        settings_factory(no_such_setting=1)


def test_the_api_key_is_secret_and_blank_is_unset(settings_factory, monkeypatch):
    monkeypatch.setenv("PAPERCHAT_API_KEY", "s3cret-api-key")
    settings = settings_factory()
    assert settings.api_key.get_secret_value() == "s3cret-api-key"
    assert "s3cret-api-key" not in repr(settings) and "s3cret-api-key" not in str(settings.model_dump())
    monkeypatch.setenv("PAPERCHAT_API_KEY", "  ")
    assert settings_factory().api_key is None
