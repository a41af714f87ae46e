"""The same decision with the trio client (AsyncAgentClient): the same calls, awaited."""

import trio

from warren_sim.client import AsyncAgentClient


async def drive(url: str) -> str:
    async with AsyncAgentClient.open(url) as client:
        run = await client.create_run("bridge_repair", seed=3, controlled_agents=["engineer-1"])
        async with client.claim(run.run_id, "engineer-1") as agent:
            obs = await agent.next_observation()
            print(obs.observation_id, obs.seq, obs.sim_time_ms, obs.reason)
            print(obs.text.splitlines()[0])
            take = next(a for a in obs.affordances if a["action"] == "take")
            command = {"action": "take", "args": {"item": take["params"]["item"]["choices"][0]}}
            receipt = await agent.submit(obs, command)
            done = await agent.wait_outcome(receipt.command_id)
            print(receipt.status, done.outcome, done.conflict)
        await client.cancel_run(run.run_id)
        return done.outcome


if __name__ == "__main__":
    trio.run(drive, "http://127.0.0.1:8000")
