const Queue = require("bull");
const Redis = require("ioredis");
const { db } = require("../db");

const redis = new Redis();
const emailQueue = new Queue("email");

// A job whose "processed" marker is a Redis key in front of a database write.
emailQueue.process(async (job) => {
  const fresh = await redis.set(`processed:${job.data.id}`, "1", "EX", 86400, "NX");
  if (!fresh) return;
  await db.query("INSERT INTO sent_emails (user_id, template) VALUES ($1, $2)", [job.data.userId, job.data.template]);
});
