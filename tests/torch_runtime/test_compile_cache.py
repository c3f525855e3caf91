"""Where torch keeps the compile caches of what keras_attn compiles
(`keras_attn.torch_runtime.compile_cache`, issue 50 item 4): keras_attn's
folder by default, a user's `TORCHINDUCTOR_CACHE_DIR` left alone, torch's
settings untouched when the switch is off, a bad value refused by name."""

import os

import pytest

torch = pytest.importorskip("torch")

from keras_attn.torch_runtime import compile_cache  # noqa: E402
from keras_attn.torch_runtime.compiled_step import CompiledStep  # noqa: E402

SWITCH = "KERAS_ATTN_TORCH_COMPILE_CACHE"
TORCH_FOLDER = "TORCHINDUCTOR_CACHE_DIR"


@pytest.fixture
def environment(monkeypatch, tmp_path):
    """No switch and no torch folder set; the user's cache base in
    `tmp_path` (restored after the test, whatever `ensure` sets)."""
    monkeypatch.delenv(SWITCH, raising=False)
    monkeypatch.delenv(TORCH_FOLDER, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(compile_cache, "_set_here", None)
    return tmp_path


def test_the_default_folder_is_under_the_user_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert compile_cache.default_folder() == str(tmp_path / "xdg" / "keras_attn" / "torch_compile")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert compile_cache.default_folder() == str(
        tmp_path / "home" / ".cache" / "keras_attn" / "torch_compile"
    )


def test_by_default_torch_caches_in_keras_attns_folder(environment):
    cache = compile_cache.ensure()
    folder = compile_cache.default_folder()
    assert cache.folder == folder == os.environ[TORCH_FOLDER]
    assert cache.chosen_by == SWITCH
    assert os.path.isdir(folder)
    # torch reads its folder from the environment at each use.
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    assert cache_dir() == folder


def test_a_folder_value_names_the_folder(environment, monkeypatch):
    monkeypatch.setenv(SWITCH, str(environment / "mine"))
    assert compile_cache.ensure().folder == str(environment / "mine") == os.environ[TORCH_FOLDER]
    monkeypatch.delenv(TORCH_FOLDER)
    monkeypatch.setenv("HOME", str(environment / "home"))
    monkeypatch.setenv(SWITCH, "~/torch_compile")
    assert compile_cache.ensure().folder == str(environment / "home" / "torch_compile")


@pytest.mark.parametrize("switch", [None, "on", "/somewhere/else"])
def test_a_users_torch_folder_is_left_alone(environment, monkeypatch, switch):
    if switch is not None:
        monkeypatch.setenv(SWITCH, switch)
    monkeypatch.setenv(TORCH_FOLDER, str(environment / "users"))
    cache = compile_cache.ensure()
    assert cache.folder == str(environment / "users") == os.environ[TORCH_FOLDER]
    assert cache.chosen_by == TORCH_FOLDER
    assert not os.path.exists(compile_cache.default_folder())


def test_torchs_own_default_is_not_taken_for_the_users(environment, monkeypatch):
    """torch writes its default folder into `TORCHINDUCTOR_CACHE_DIR` when
    dynamo is imported: keras_attn's folder replaces it."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    monkeypatch.setenv(TORCH_FOLDER, default_cache_dir())
    cache = compile_cache.ensure()
    assert cache.folder == compile_cache.default_folder() == os.environ[TORCH_FOLDER]
    assert cache.chosen_by == SWITCH


def test_off_leaves_torchs_settings_alone(environment, monkeypatch):
    monkeypatch.setenv(SWITCH, "off")
    before = (
        torch._inductor.config.get_config_copy(), torch._functorch.config.get_config_copy()
    )
    cache = compile_cache.ensure()
    assert TORCH_FOLDER not in os.environ
    assert cache.folder is None and cache.chosen_by == "torch"
    assert not os.path.exists(compile_cache.default_folder())
    after = (
        torch._inductor.config.get_config_copy(), torch._functorch.config.get_config_copy()
    )
    assert after == before


def test_a_cache_the_user_turned_off_stays_off(environment):
    with torch._inductor.config.patch(fx_graph_cache=False):
        cache = compile_cache.ensure()
        assert torch._inductor.config.fx_graph_cache is False
    assert cache.fx_graph_cache is False
    assert cache.folder == compile_cache.default_folder()


@pytest.mark.parametrize("value", ["torch_cache", "./cache", "2", "enabled"])
def test_a_bad_value_is_refused_by_name(environment, monkeypatch, value):
    monkeypatch.setenv(SWITCH, value)
    with pytest.raises(ValueError) as error:
        compile_cache.ensure()
    message = str(error.value)
    assert f"{SWITCH}={value!r}" in message
    assert "absolute folder path" in message
    assert TORCH_FOLDER not in os.environ


def test_an_unwritable_folder_leaves_torch_its_own(environment, monkeypatch, caplog):
    blocker = environment / "a_file"
    blocker.write_text("")
    monkeypatch.setenv(SWITCH, str(blocker / "cache"))
    cache = compile_cache.ensure()
    assert cache.folder is None and cache.chosen_by == "torch"
    assert TORCH_FOLDER not in os.environ
    assert SWITCH in caplog.text


def test_the_compiled_decoding_step_sets_the_folder_before_compiling(environment):
    CompiledStep(lambda *args: args)  # torch.compile is lazy: nothing compiles here
    assert os.environ[TORCH_FOLDER] == compile_cache.default_folder()


def test_a_process_keeps_its_first_folder(environment, monkeypatch):
    first = compile_cache.ensure()
    monkeypatch.setenv(SWITCH, str(environment / "later"))
    again = compile_cache.ensure()
    assert again.folder == first.folder == compile_cache.default_folder()
    assert again.chosen_by == SWITCH
