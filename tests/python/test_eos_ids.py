#!/usr/bin/python3
"""Every end-of-sequence id a checkpoint lists stops generation (issue 47).

    python3 tests/python/test_eos_ids.py --pdlab build/src/pdlab/pdlab

The bundled tiny model is copied to a temp folder with a generation_config.json
whose eos_token_id lists three ids (as Llama 3.1's does), the greedy run's 6th
output being the 2nd of them, then the 3rd; the other two ids are none of the
first 6 outputs. Then:

  info       lists the three ids, and names generation_config.json's temperature as not applied
  generate   stops at the first of them (stopped_at_eos); --ignore-eos runs past it
  serve      /v1/completions stops there too, finish_reason "stop", with --batching
             continuous and serial
"""

import argparse
import http.client
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "Once upon a time"
N = 24
HIT = 5  # the greedy run's output that is an EOS id


def run(pdlab, *args):
    r = subprocess.run([pdlab, *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"pdlab {' '.join(args)}: exit {r.returncode}: {r.stderr}"
    return r


def generate(pdlab, folder, tmp, *extra):
    out = Path(tmp) / "generate.json"
    run(pdlab, "generate", "--model", str(folder), "--prompt", PROMPT, "-n", str(N), "--greedy", "--threads", "1",
        "--json", str(out), *extra)
    return json.loads(out.read_text())


def serve_completion(pdlab, folder, batching):
    proc = subprocess.Popen([pdlab, "serve", "--model", str(folder), "--port", "0", "--threads", "1",
                             "--batching", batching], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        m = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        assert m, f"pdlab serve did not start: {line!r}"
        c = http.client.HTTPConnection("127.0.0.1", int(m.group(1)), timeout=60)
        c.request("POST", "/v1/completions", body=json.dumps({"prompt": PROMPT, "max_tokens": N, "temperature": 0}),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        body = r.read().decode()
        assert r.status == 200, (r.status, body)
        return json.loads(body)
    finally:
        proc.kill()
        proc.wait(10)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pdlab", required=True)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "tiny-eos"
        shutil.copytree(ROOT / "data" / "models" / "tiny", folder)
        free = generate(a.pdlab, folder, tmp, "--ignore-eos")
        run_ids, hit = free["generated_ids"], free["generated_ids"][HIT]
        assert len(run_ids) == N, free
        misses = [i for i in range(1000) if i not in run_ids[:HIT + 1]][:2]
        stop_at = run_ids.index(hit) + 1  # where a run that honours the list ends
        for eos in ([misses[0], hit, misses[1]], [misses[0], misses[1], hit]):
            (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": eos, "temperature": 0.6}))
            what = f"eos_token_id {eos}, greedy outputs {run_ids}"

            info = run(a.pdlab, "info", "--model", str(folder)).stdout
            assert f"end of sequence  any of ids {', '.join(map(str, eos))}" in info, info
            assert re.search(r"generation .*temperature 0\.6.*not applied", info), info

            got = generate(a.pdlab, folder, tmp)
            assert got["generated_ids"] == run_ids[:stop_at] and got["stopped_at_eos"], (what, got)
            assert generate(a.pdlab, folder, tmp, "--ignore-eos")["generated_ids"] == run_ids, what

            for batching in ("continuous", "serial"):
                j = serve_completion(a.pdlab, folder, batching)
                choice = j["choices"][0]
                assert choice["finish_reason"] == "stop", (what, batching, j)
                assert j["usage"]["completion_tokens"] == stop_at, (what, batching, j)
        print(f"ok    cli.eos_ids: generate, serve (continuous, serial) and info honour every id of "
              f"generation_config.json's eos_token_id (output {HIT} as the 2nd and the 3rd)")


if __name__ == "__main__":
    main()
