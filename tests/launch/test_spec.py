"""Launch specs: real engine command lines parsed, one argument changed per edit, nothing else."""

import json
import shlex
import sys

import pytest

from specdoctor.errors import InputError
from specdoctor.launch import LaunchSpec, Speculation, parse_command
from specdoctor.launch import argv as A

VLLM = ("HF_HOME=/data/hf python -m vllm.entrypoints.openai.api_server --model /m/target "
        "--port=9001 --host 0.0.0.0 --max-model-len 4096 --speculative-config "
        "'{\"method\":\"draft_model\",\"model\":\"/m/draft\",\"num_speculative_tokens\":3}' "
        "--enforce-eager")
SERVE = "vllm serve Qwen/Qwen3-8B --speculative_config '{\"method\":\"ngram\",\"num_speculative_tokens\":4,\"prompt_lookup_max\":5}'"
SGLANG = ("python3 -m sglang.launch_server --model-path m --speculative-algorithm EAGLE3 "
          "--speculative-draft-model-path d --speculative-num-steps 3 --speculative-eagle-topk 1 "
          "--speculative-num-draft-tokens 4 --port 30001")
LLAMA = "llama-server -m target.gguf -md draft.gguf --draft-max 8 --port 8081"


def _cfg(spec: LaunchSpec) -> dict:
    return json.loads(A.get(spec.argv, "--speculative-config"))


def test_vllm_api_server_command_is_read_as_typed():
    s = parse_command(VLLM)
    assert s.engine == "vllm"
    assert s.env == {"HF_HOME": "/data/hf"}
    assert (s.port, s.host) == (9001, "127.0.0.1")  # wildcard host probed on loopback
    sp = s.speculation
    assert (sp.method, sp.k, sp.drafter) == ("draft_model", 3, "/m/draft")
    assert s.label == "draft_model:k=3"


def test_with_k_changes_only_k_in_place():
    s = parse_command(VLLM)
    t = s.with_k(5)
    assert _cfg(t) == {"method": "draft_model", "model": "/m/draft", "num_speculative_tokens": 5}
    # the config stays where the user wrote it; every other token is untouched
    i = t.argv.index("--speculative-config")
    assert t.argv[:i] == s.argv[:i] and t.argv[i + 2:] == s.argv[i + 2:]
    assert t.changes_from(s) == ["speculation draft_model:k=3 → draft_model:k=5"]
    assert t.label == "draft_model:k=5"


def test_new_method_drops_the_old_drafter_and_keeps_k():
    t = parse_command(VLLM).with_speculative("ngram", prompt_lookup_max=4, prompt_lookup_min=2)
    assert _cfg(t) == {"method": "ngram", "num_speculative_tokens": 3,
                       "prompt_lookup_max": 4, "prompt_lookup_min": 2}


def test_same_method_keeps_options_and_changes_drafter():
    t = parse_command(SERVE).with_speculative(drafter=None, k=2)
    assert _cfg(t) == {"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 5}
    u = parse_command(VLLM).with_speculative(drafter="/m/other")
    assert _cfg(u)["model"] == "/m/other" and _cfg(u)["num_speculative_tokens"] == 3


def test_baseline_removes_every_speculative_argument():
    base = parse_command(VLLM + " --speculative-config.num_speculative_tokens 6"
                         " --per-request-spec-decode-metrics detailed").without_speculation()
    assert not any("speculative" in a for a in base.argv)
    assert base.speculation is None and base.label == "spec-off"
    assert "--enforce-eager" in base.argv and "--max-model-len" in base.argv


def test_dotted_override_is_read_and_folded_into_one_config():
    s = parse_command(SERVE + " --speculative-config.num_speculative_tokens 6")
    assert s.k == 6  # the dotted override wins, as vLLM applies it
    t = s.with_k(2)
    assert [a for a in t.argv if a.startswith("--speculative")] == ["--speculative_config"]
    assert _cfg(t)["num_speculative_tokens"] == 2


def test_vllm_serve_port_defaults_and_edits():
    s = parse_command(SERVE)
    assert s.port == 8000
    t = s.with_port(8123)
    assert t.port == 8123 and A.get(t.argv, "--port") == "8123"
    u = parse_command(VLLM).with_port(9100)  # --port=9001 replaced, not duplicated
    assert [a for a in u.argv if a.startswith("--port")] == ["--port"]
    assert A.get(u.argv, "--port") == "9100"


def test_environment_edits():
    s = parse_command(VLLM, env={"A": "1"})
    t = s.with_cache_root("/tmp/c").with_pythonpath("/probes").with_devices(["2", "3"])
    assert t.env["VLLM_CACHE_ROOT"] == "/tmp/c"
    assert t.env["PYTHONPATH"].split(":")[0] == "/probes"
    assert t.env["CUDA_VISIBLE_DEVICES"] == "2,3"
    assert t.env["A"] == "1" and t.argv == s.argv
    assert "VLLM_CACHE_ROOT=/tmp/c" in t.shell_command()


def test_shell_command_round_trips():
    s = parse_command(VLLM).with_k(4).with_env(X="a b")
    again = parse_command(s.shell_command())
    assert again.argv == s.argv and again.env == s.env


def test_sglang_chain_keeps_draft_tokens_at_k_plus_one():
    s = parse_command(SGLANG)
    assert s.engine == "sglang" and s.port == 30001
    assert (s.speculation.method, s.k, s.speculation.drafter) == ("eagle3", 3, "d")
    t = s.with_k(5)
    assert A.get(t.argv, "--speculative-num-steps") == "5"
    assert A.get(t.argv, "--speculative-num-draft-tokens") == "6"
    off = s.without_speculation()
    assert off.argv == tuple(shlex.split("python3 -m sglang.launch_server --model-path m --port 30001"))


def test_llama_server():
    s = parse_command(LLAMA)
    assert s.engine == "llamacpp" and s.port == 8081 and s.k == 8
    assert A.get(s.with_k(4).argv, "--draft-max") == "4"
    assert s.without_speculation().argv == ("llama-server", "-m", "target.gguf", "--port", "8081")


def test_llama_servers_drafting_policy_is_read_under_its_own_names():
    s = parse_command(LLAMA + " --spec-draft-p-min 0.75 --draft-min 2")
    assert s.speculation.options == {"p_min": 0.75, "n_min": 2}
    assert parse_command(LLAMA).speculation.options == {}
    with pytest.raises(InputError, match="--spec-draft-p-min 'high' is not a number"):
        parse_command(LLAMA + " --spec-draft-p-min high").speculation


def test_json_round_trip():
    s = parse_command(VLLM).with_k(2)
    assert LaunchSpec.from_json(json.loads(json.dumps(s.to_json()))) == s


@pytest.mark.parametrize("cmd, problem", [
    ("", "empty"),
    ("node server.js", "does not recognise"),
    ("vllm serve m --speculative-config '{bad'", "not JSON"),
    ("vllm serve m --port eighty", "not a number"),
])
def test_bad_commands_name_the_problem(cmd, problem):
    with pytest.raises(InputError, match=problem):
        parse_command(cmd)


def test_k_on_a_spec_off_command_is_refused():
    with pytest.raises(InputError, match="speculation off"):
        parse_command("vllm serve m").with_k(3)
    with pytest.raises(InputError, match="at least 1"):
        parse_command(SERVE).with_k(0)


def test_the_diagnosis_edits_change_one_argument_at_a_time():
    """The edits diagnose's relaunch experiments make: port, speculation off, environment."""
    spec = json.dumps({"method": "draft_model", "model": "/m/b", "num_speculative_tokens": 4})
    la = LaunchSpec((sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model",
                     "/m/a", "--port", "8000", "--speculative-config", spec,
                     "--per-request-spec-decode-metrics"), {"A": "1"})
    assert la.speculation.drafter == "/m/b"
    moved = la.with_port(9123)
    assert moved.arg("--port") == "9123" and moved.port == 9123 and moved.arg("--model") == "/m/a"
    off = la.without_speculation()
    assert off.arg("--speculative-config") is None and off.argv[:5] == la.argv[:5]
    assert "--per-request-spec-decode-metrics" not in off.argv   # vLLM refuses it spec-off
    assert la.with_env(B="2").env == {"A": "1", "B": "2"}
    assert LaunchSpec(("x", "--port=7",)).arg("--port") == "7"
    assert la.with_speculative(drafter="/m/c").speculation == Speculation(
        "draft_model", 4, "/m/c", {})


def test_with_arg_none_is_a_bare_flag_and_without_arg_removes():
    la = LaunchSpec(("vllm", "serve", "m", "--enforce-eager", "--dtype", "float16"))
    assert la.with_arg("--enforce-eager", None).argv == la.argv
    assert la.without_arg("--dtype").argv == ("vllm", "serve", "m", "--enforce-eager")
    assert la.with_arg("--dtype", None).arg("--dtype") is None


def test_launch_commands_in_every_form_user_types_them():
    forms = {
        "HF_HOME=/x vllm serve m --port 9": ("vllm", {"HF_HOME": "/x"}, 9),
        "env HF_HOME=/x A=1 vllm serve m": ("vllm", {"HF_HOME": "/x", "A": "1"}, 8000),
        "python3 -m vllm.entrypoints.openai.api_server --model m": ("vllm", {}, 8000),
        "python -m sglang.launch_server --model-path m": ("sglang", {}, 30000),
        "llama-server -m a.gguf --port 8081": ("llamacpp", {}, 8081),
    }
    for cmd, (engine, env, port) in forms.items():
        s = parse_command(cmd)
        assert (s.engine, s.env, s.port) == (engine, env, port), cmd
        assert "=" not in s.argv[0] and s.argv[0] != "env"
    with pytest.raises(InputError, match="cannot be split"):
        parse_command("vllm serve 'm")
    with pytest.raises(InputError, match="does not recognise"):
        parse_command("python3 server.py --port 9")
    other = parse_command("A=1 python3 server.py --port 9", any_server=True)
    assert (other.port, other.env, other.engine) == (9, {"A": "1"}, "unknown")
    with pytest.raises(InputError, match="does not recognise"):
        other.without_speculation()
