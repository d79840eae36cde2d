import json
from kafka import KafkaConsumer
import psycopg2

conn = psycopg2.connect("dbname=app")
consumer = KafkaConsumer("shipments", group_id="shipments_v3")

# A script consuming in a loop at its top level; its marker commits with its effect (the
# connection's `with` block is one transaction).

for message in consumer:
    event = json.loads(message.value)
    with conn:
        with conn.cursor() as cur:
            cur.execute("INSERT INTO processed_events (event_id) VALUES (%s) ON CONFLICT DO NOTHING", (event["id"],))
            cur.execute("UPDATE shipments SET status = %s WHERE id = %s", (event["status"], event["shipment"]))
