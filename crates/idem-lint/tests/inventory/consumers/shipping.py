import json

import pika
from sqlalchemy.orm import Session

from .db import engine
from .models import ProcessedMessage, Shipment


# A RabbitMQ consumer that commits its marker in one transaction and its effect in another.
def on_shipment(channel, method, properties, body):
    message = json.loads(body)
    with Session(engine) as session:
        session.add(ProcessedMessage(id=message["id"]))
        session.commit()
        session.add(Shipment(order_id=message["order_id"], carrier=message["carrier"]))
        session.commit()
    channel.basic_ack(delivery_tag=method.delivery_tag)


connection = pika.BlockingConnection(pika.ConnectionParameters("localhost"))
channel = connection.channel()
channel.basic_consume(queue="shipping", on_message_callback=on_shipment)
