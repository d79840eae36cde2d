import json

import redis
from flask import Flask, request

from .models import Order, db

app = Flask(__name__)
r = redis.Redis()


# A webhook route whose marker is a Redis SET NX with a TTL, apart from the database write.
@app.post("/webhooks/shopify")
def shopify_webhook():
    event = json.loads(request.data)
    if r.set(f"processed:{event['id']}", 1, nx=True, ex=3600):
        db.session.add(Order(shopify_id=event["id"], total=event["total_price"]))
        db.session.commit()
    return "", 200
