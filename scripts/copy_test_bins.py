#!/usr/bin/env python3
"""Copies the test executables named in `cargo test --no-run
--message-format=json` output (standard input) into DIR as
test-CRATE-TARGET, for runs on the GPU machine, which has no Rust
toolchain. Binaries are skipped; examples too with --no-examples.

    cargo test --release --no-run -p CRATE --message-format=json \\
      | python3 scripts/copy_test_bins.py .bin [--no-examples]
"""
import json
import shutil
import sys


def main(argv):
    out = argv[1]
    skip = [["bin"]] + ([["example"]] if "--no-examples" in argv[2:] else [])
    for line in sys.stdin:
        m = json.loads(line)
        if m.get("reason") != "compiler-artifact" or not m.get("executable"):
            continue
        if m["target"]["kind"] in skip:
            continue
        name = m["target"]["name"]
        crate = m["package_id"].split("#")[0].rsplit("/", 1)[-1]
        shutil.copy(m["executable"], f"{out}/test-{crate}-{name}")


if __name__ == "__main__":
    main(sys.argv)
