from celery import Celery
from django.db import transaction

from .models import Invoice, ProcessedEvent

app = Celery("jobs")


# A Celery task whose consumer name comes from idem-lint.toml; its marker commits with its
# effect.
@app.task
def sync_invoice(event):
    with transaction.atomic():
        ProcessedEvent.objects.create(event_id=event["id"])
        Invoice.objects.filter(pk=event["invoice_id"]).update(status=event["status"])
