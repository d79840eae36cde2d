const express = require("express");
const { db } = require("../db");

const app = express();

// A webhook route claiming the event in its own processed-events table, in the transaction
// of its effect.
app.post("/webhooks/stripe", async (req, res) => {
  const event = req.body;
  await db.transaction(async (tx) => {
    const { rowCount } = await tx.query(
      "INSERT INTO processed_events (event_id) VALUES ($1) ON CONFLICT DO NOTHING", [event.id]);
    if (rowCount === 0) return;
    await tx.query("UPDATE accounts SET plan = $1 WHERE id = $2", [event.data.plan, event.data.account]);
  });
  res.sendStatus(200);
});

module.exports = { app };
