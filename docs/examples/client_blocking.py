"""One decision with the blocking client (AgentClient): claim, read an observation, send a command."""

from warren_sim.client import AgentClient


def drive(url: str) -> str:
    with AgentClient.open(url) as client:
        run = client.create_run("bridge_repair", seed=3, controlled_agents=["engineer-1"])
        with client.claim(run.run_id, "engineer-1") as agent:  # released when the block ends
            obs = agent.next_observation()  # an Observation (fields below)
            print(obs.observation_id, obs.seq, obs.sim_time_ms, obs.reason)  # engineer-1#0 0 0 start
            print(obs.text.splitlines()[0])  # the same facts as obs.observation, for a prompt
            take = next(a for a in obs.affordances if a["action"] == "take")
            command = {"action": "take", "args": {"item": take["params"]["item"]["choices"][0]}}
            receipt = agent.submit(obs, command)  # the verdict: accepted, outcome pending
            done = agent.wait_outcome(receipt.command_id)  # the engine's outcome
            print(receipt.status, done.outcome, done.conflict)  # accepted accepted None
        client.cancel_run(run.run_id)
        return done.outcome


if __name__ == "__main__":
    drive("http://127.0.0.1:8000")
