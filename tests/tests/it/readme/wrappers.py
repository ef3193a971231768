# The commands the README's sh blocks call, as the harness runs them (tests/tests/it/readme.rs).
# Installed on the blocks' PATH as `curl`, `tidings-server`, `cargo` and `npm`; chooses by the name
# it is called by. README_LINE is the README line of the command running (bash's DEBUG trap).
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

LINE = os.environ.get("README_LINE", "?")


def hook(path, payload):
    request = urllib.request.Request(
        os.environ["README_HOOK"] + path,
        data=json.dumps(payload).encode(),
        headers={"content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request) as answer:
            return json.load(answer)
    except urllib.error.HTTPError as e:
        sys.exit(json.load(e)["error"])


def resolve(args):
    return hook("/resolve", {"line": LINE, "args": args})["args"]


def curl(args):
    """The real curl with ids put in; its status is judged by the hook (2xx unless the
    README line's comment names another)."""
    args = resolve(args)
    marker = b"\n@@readme-status "
    run = subprocess.run(
        [os.environ["README_REAL_CURL"], *args, "-w", "\n@@readme-status %{http_code}"],
        stdout=subprocess.PIPE,
    )
    out = run.stdout
    at = out.rfind(marker)
    body, status = (out[:at], int(out[at + len(marker):] or 0)) if at >= 0 else (out, 0)
    sys.stdout.buffer.write(body)
    sys.stdout.flush()
    if run.returncode != 0:
        sys.exit(f"README.md:{LINE}: curl exited with {run.returncode}")
    verdict = hook(
        "/curl",
        {"line": LINE, "args": args, "status": status, "output": body.decode("utf-8", "replace")},
    )
    if not verdict["ok"]:
        sys.exit(verdict["message"])


def tidings_server(args):
    """The real binary with the harness's settings where the block sets none: operator
    commands run to completion (their ids recorded); a server runs in the background of
    the block, its output in servers/<pid>.log for the harness to check and stop."""
    args = resolve(args)
    env = dict(os.environ)
    env.setdefault("TIDINGS_DATA_DIR", env["README_CLI_DATA_DIR"])
    env.setdefault("TIDINGS_DNS_SERVER", env["README_DNS_SERVER"])
    if env.get("README_CLI_DATABASE_URL"):
        env.setdefault("TIDINGS_DATABASE_URL", env["README_CLI_DATABASE_URL"])
    binary = env["README_SERVER_BIN"]
    if args[:1] == ["migrate"] and "TIDINGS_DATABASE_URL" not in env:
        # On sled the README's operator block still shows `migrate`: it gets a scratch
        # database of its own, where there is one.
        if not env.get("README_DATABASE_URL"):
            print(f"README.md:{LINE}: skipped: migrate (no PostgreSQL answers)", file=sys.stderr)
            return
        env["TIDINGS_DATABASE_URL"] = env["README_DATABASE_URL"]
    if args[:1] in (["workspace"], ["key"], ["migrate"]) or "--help" in args or "--version" in args:
        run = subprocess.run([binary, *args], env=env, stdout=subprocess.PIPE)
        sys.stdout.buffer.write(run.stdout)
        sys.stdout.flush()
        hook("/cli", {"line": LINE, "args": args, "stdout": run.stdout.decode("utf-8", "replace")})
        sys.exit(run.returncode)
    env.setdefault("TIDINGS_LISTEN", "127.0.0.1:0")
    os.makedirs("servers", exist_ok=True)
    pid = os.getpid()
    with open(f"servers/{pid}.line", "w") as f:
        f.write(LINE)
    log = os.open(f"servers/{pid}.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.execve(binary, [binary, *args], env)


def cargo(args):
    """`cargo run … -p tidings-server` is the server the harness started (at $T, its
    printed bootstrap key in $K); `cargo test …` is what runs this test. Nothing else."""
    if args[:1] == ["run"] and "tidings-server" in args:
        print(f"README.md:{LINE}: (readme test) the harness's tidings-server stands for `cargo {' '.join(args)}`")
    elif args[:1] == ["test"]:
        print(f"README.md:{LINE}: (readme test) `cargo {' '.join(args)}` is what runs this test; not run again")
    else:
        sys.exit(f"README.md:{LINE}: the readme test runs no `cargo {' '.join(args)}`; teach tests/tests/it/readme/wrappers.py")


def npm(args):
    """`npm install resend@<version>`: the SDK the Resend test drives (tests/sdk/resend-node,
    pinned to the same version), linked into the block's directory instead of downloaded;
    installed there with the real `npm ci` when it is not yet. Nothing else."""
    sdk = os.environ["README_RESEND_SDK_DIR"]
    with open(os.path.join(sdk, "package.json")) as f:
        pinned = json.load(f)["dependencies"]["resend"]
    if args != ["install", f"resend@{pinned}"]:
        sys.exit(f"README.md:{LINE}: the readme test runs `npm install resend@{pinned}` only, not `npm {' '.join(args)}`")
    if not os.path.exists(os.path.join(sdk, "node_modules", "resend", "package.json")):
        real = [p for p in os.environ["PATH"].split(":")[1:] if os.path.exists(os.path.join(p, "npm"))]
        if not real:
            sys.exit(f"README.md:{LINE}: npm is not installed")
        subprocess.run([os.path.join(real[0], "npm"), "ci", "--no-audit", "--no-fund", "--silent"], cwd=sdk, check=True)
    if not os.path.exists("node_modules"):
        os.symlink(os.path.join(sdk, "node_modules"), "node_modules")
    print(f"README.md:{LINE}: (readme test) resend@{pinned} from {sdk}")


{"curl": curl, "tidings-server": tidings_server, "cargo": cargo, "npm": npm}[os.path.basename(sys.argv[0])](sys.argv[1:])
