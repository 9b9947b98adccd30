"""Dataclass settings become typed command-line flags (the example and benchmark scripts)."""

from __future__ import annotations

import dataclasses

import pytest

from tokenized_bandit_gym.script_arguments import config_option, field_docstrings, parse_dataclass_arguments


@dataclasses.dataclass
class Settings:
    rounds: int = 10
    """rounds per run"""
    env_id: str = "TokenizedLinearBandit-v0"
    scale: float = 0.5
    paper: bool = False
    dims: tuple[int, ...] = (64, 256)
    labelled: str = dataclasses.field(default="x", metadata={"help": "from the metadata"})


def test_defaults_when_no_flags() -> None:
    assert parse_dataclass_arguments(Settings, "doc", []) == Settings()


def test_each_flag_typed_by_its_default() -> None:
    argv = ["--rounds", "7", "--env-id", "E-v0", "--scale", "2", "--paper", "--dims", "1", "2", "3"]
    settings = parse_dataclass_arguments(Settings, "doc", argv)
    assert settings == Settings(rounds=7, env_id="E-v0", scale=2.0, paper=True, dims=(1, 2, 3))
    assert isinstance(settings.scale, float) and isinstance(settings.dims, tuple)


def test_underscore_spelling_and_negated_bool() -> None:
    settings = parse_dataclass_arguments(Settings, None, ["--env_id", "F-v0", "--no-paper"])
    assert settings.env_id == "F-v0" and settings.paper is False


def test_bad_value_names_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_dataclass_arguments(Settings, "doc", ["--rounds", "ten"])
    error = capsys.readouterr().err
    assert "--rounds" in error and "ten" in error


def test_help_comes_from_field_docstrings_and_metadata(capsys: pytest.CaptureFixture[str]) -> None:
    assert field_docstrings(Settings) == {"rounds": "rounds per run"}
    with pytest.raises(SystemExit):
        parse_dataclass_arguments(Settings, "First line.\nMore.", ["--help"])
    out = capsys.readouterr().out
    assert "rounds per run" in out and "from the metadata" in out and "First line." in out and "More." not in out


def test_rejects_non_dataclasses_and_untypable_fields() -> None:
    with pytest.raises(TypeError, match="dataclass"):
        parse_dataclass_arguments(dict, "doc", [])

    @dataclasses.dataclass
    class NoDefault:
        rounds: int

    with pytest.raises(TypeError, match="NoDefault.rounds"):
        parse_dataclass_arguments(NoDefault, "doc", [])

    @dataclasses.dataclass
    class EmptyTuple:
        dims: tuple[int, ...] = ()

    with pytest.raises(TypeError, match="EmptyTuple.dims"):
        parse_dataclass_arguments(EmptyTuple, "doc", [])


@dataclasses.dataclass
class MoreSettings(Settings):
    seeds: str = "0"
    """the seeds"""


@dataclasses.dataclass
class OverriddenSettings(MoreSettings):
    rounds: int = 20
    """rounds per run, overridden"""


def test_a_subclass_keeps_its_bases_field_docstrings_and_its_own_win() -> None:
    assert field_docstrings(MoreSettings) == {"rounds": "rounds per run", "seeds": "the seeds"}
    assert field_docstrings(OverriddenSettings) == {"rounds": "rounds per run, overridden", "seeds": "the seeds"}
    assert parse_dataclass_arguments(MoreSettings, "doc", ["--seeds", "1,2"]) == MoreSettings(seeds="1,2")


@dataclasses.dataclass(frozen=True)
class LengthPart:
    """A config part.

    Attributes:
        max_length: L, the response
            length.
        fixed_length: EOS only at L.
    """

    max_length: int = 30
    fixed_length: bool = True


@dataclasses.dataclass
class ScriptSettings:
    max_length: int = config_option(LengthPart, "max_length")
    fixed_length: bool = config_option(LengthPart, "fixed_length", False, note="the script's own choice")


def test_a_config_option_takes_the_fields_help_and_default_or_the_scripts() -> None:
    fields = {item.name: item for item in dataclasses.fields(ScriptSettings)}
    assert fields["max_length"].metadata["help"] == "L, the response length"  # the config's words, one line
    assert fields["fixed_length"].metadata["help"] == "EOS only at L (the script's own choice)"
    assert ScriptSettings() == ScriptSettings(max_length=LengthPart.max_length, fixed_length=False)
    assert parse_dataclass_arguments(ScriptSettings, "doc", ["--max-length", "7", "--fixed-length"]) == ScriptSettings(
        max_length=7, fixed_length=True
    )


def test_a_config_option_refuses_a_name_the_config_does_not_have() -> None:
    with pytest.raises(TypeError, match="LengthPart has no field 'max_lenght'.*max_length, fixed_length"):
        config_option(LengthPart, "max_lenght")
    with pytest.raises(TypeError, match="config dataclass"):
        config_option(dict, "max_length")


def test_the_alignment_scripts_options_are_the_config_fields() -> None:
    """The options a script shares with the env are its config's fields: same default unless the script sets its own."""
    from tokenized_bandit_gym.envs.language_model_config import TokenizedAlignmentConfig
    from tokenized_bandit_gym.evaluation.alignment_regret import AlignmentRegretOptions

    config = TokenizedAlignmentConfig()
    options = AlignmentRegretOptions()
    assert options.gamma == config.reading.gamma and options.noise_scale == config.rewards.noise_scale
    assert options.device == config.source.device
    help_of = {item.name: item.metadata.get("help", "") for item in dataclasses.fields(AlignmentRegretOptions)}
    assert "v(p)" in help_of["gamma"] and "sigma" in help_of["noise_scale"]
