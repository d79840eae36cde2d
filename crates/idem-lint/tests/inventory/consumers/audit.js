const amqp = require("amqplib");
const { pool } = require("../db");

// A RabbitMQ consumer with no marker at all: a redelivery writes the audit row again.
async function start() {
  const conn = await amqp.connect("amqp://localhost");
  const channel = await conn.createChannel();
  await channel.consume("audit-log", async (msg) => {
    const entry = JSON.parse(msg.content.toString());
    await pool.query("INSERT INTO audit_entries (actor, action) VALUES ($1, $2)", [entry.actor, entry.action]);
    channel.ack(msg);
  });
}

module.exports = { start };
