"""OpenEnv on agentfs: a SandboxBackend whose sandboxes are agentfs workspaces with a lifetime."""

from __future__ import annotations

from agentfs.compat.openenv import AgentFSSandboxBackend


def main() -> None:
    backend = AgentFSSandboxBackend()
    sandbox = backend.create(timeout_s=300, envs={"MODE": "example"}, metadata={"harness": "demo"})
    try:
        sandbox.write_text("agent/config.json", '{"model": "demo"}')
        print(sandbox.exec("cat agent/config.json; echo \" $MODE\"").stdout.strip())
        job = sandbox.start_bg("sleep 0.2; echo agent finished > agent/done.txt")
        print("background job", job.pid, "exited", job.wait(timeout=30))
        print(sandbox.read_text("agent/done.txt").strip(), sandbox.exists("agent/done.txt"))
    finally:
        sandbox.kill()


if __name__ == "__main__":
    main()
