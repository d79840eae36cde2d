import { Kafka } from "kafkajs";
import { Pool } from "pg";

const kafka = new Kafka({ brokers: ["localhost:9092"] });
const pool = new Pool();
const consumer = kafka.consumer({ groupId: "billing-group" });

// A Kafka consumer whose marker commits on its own, before the effect.
export async function start() {
  await consumer.subscribe({ topic: "invoices" });
  await consumer.run({
    eachMessage: async ({ message }) => {
      const event = JSON.parse(message.value.toString());
      await pool.query("INSERT INTO processed_events (event_id) VALUES ($1) ON CONFLICT DO NOTHING", [event.id]);
      await pool.query("UPDATE invoices SET status = 'paid' WHERE id = $1", [event.invoiceId]);
    },
  });
}
