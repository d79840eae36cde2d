//! Generated handler files of the JVM, Ruby and Rust languages for the bench's tree: a webhook
//! controller and a broker consumer in each, numbered so every copy is its own file.

/// `(relative path, text)` of the generated files of copy `n`.
pub(crate) fn files(n: usize) -> Vec<(String, String)> {
    vec![
        (
            format!("java/src/main/java/com/acme/billing{n}/WebhookController.java"),
            java(n),
        ),
        (
            format!("kotlin/src/main/kotlin/com/acme/orders{n}/OrderListener.kt"),
            kotlin(n),
        ),
        (
            format!("ruby/app/controllers/webhooks{n}_controller.rb"),
            ruby_controller(n),
        ),
        (format!("ruby/app/jobs/ledger{n}_job.rb"), ruby_job(n)),
        (format!("rust/src/handlers{n}.rs"), rust(n)),
    ]
}

fn java(n: usize) -> String {
    format!(
        r#"package com.acme.billing{n};

import org.springframework.http.ResponseEntity;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.transaction.annotation.Transactional;
import org.springframework.web.bind.annotation.*;

@RestController
@RequestMapping("/webhooks")
public class WebhookController {{
    private final JdbcTemplate jdbc;
    private final KafkaTemplate<String, String> kafka;

    public WebhookController(JdbcTemplate jdbc, KafkaTemplate<String, String> kafka) {{
        this.jdbc = jdbc;
        this.kafka = kafka;
    }}

    @PostMapping("/stripe")
    @Transactional
    public ResponseEntity<Void> stripe(@RequestBody String payload, @RequestHeader("Stripe-Signature") String sig) {{
        Event event = Webhook.constructEvent(payload, sig, secret());
        int claimed = jdbc.update("INSERT INTO processed_events (event_id) VALUES (?) ON CONFLICT DO NOTHING", event.getId());
        if (claimed == 0) {{
            return ResponseEntity.ok().build();
        }}
        jdbc.update("UPDATE invoices SET status = ? WHERE id = ?", "paid", event.getInvoiceId());
        return ResponseEntity.ok().build();
    }}

    @KafkaListener(topics = "payments-{n}")
    public void onPayment(String message) {{
        Payment p = Payment.parse(message);
        jdbc.update("UPDATE accounts SET balance = balance + ? WHERE id = ?", p.amount(), p.account());
        kafka.send("payments-applied", p.id(), message);
    }}

    private String secret() {{
        return System.getenv("STRIPE_WEBHOOK_SECRET");
    }}
}}
"#
    )
}

fn kotlin(n: usize) -> String {
    format!(
        r#"package com.acme.orders{n}

import org.springframework.amqp.rabbit.annotation.RabbitListener
import org.springframework.data.jpa.repository.JpaRepository
import org.springframework.stereotype.Component
import org.springframework.transaction.annotation.Transactional

interface OrderRepository : JpaRepository<Order, Long> {{
    fun existsByExternalId(externalId: String): Boolean
}}

@Component
class OrderListener(private val orders: OrderRepository) {{
    @RabbitListener(queues = ["orders-{n}"])
    @Transactional
    fun onOrder(event: OrderEvent) {{
        if (orders.existsByExternalId(event.id)) {{
            return
        }}
        val order = Order(externalId = event.id, total = event.total)
        orders.save(order)
    }}

    fun describe(event: OrderEvent): String = "order ${{event.id}} of ${{event.total}}"
}}
"#
    )
}

fn ruby_controller(n: usize) -> String {
    format!(
        r#"class Webhooks{n}Controller < ApplicationController
  skip_before_action :verify_authenticity_token

  def stripe
    payload = request.body.read
    sig = request.headers["Stripe-Signature"]
    event = Stripe::Webhook.construct_event(payload, sig, ENV["STRIPE_WEBHOOK_SECRET"])
    ActiveRecord::Base.transaction do
      ProcessedEvent.create!(event_id: event.id)
      invoice = Invoice.find_by(stripe_id: event.data.object.id)
      invoice&.update!(status: "paid")
    end
    head :ok
  rescue ActiveRecord::RecordNotUnique
    head :ok
  end

  def github
    event = JSON.parse(request.body.read)
    return head :ok if Delivery.exists?(guid: request.headers["X-GitHub-Delivery"])
    Delivery.create!(guid: request.headers["X-GitHub-Delivery"], action: event["action"])
    head :ok
  end
end
"#
    )
}

fn ruby_job(n: usize) -> String {
    format!(
        r#"class Ledger{n}Job
  include Sidekiq::Job

  def perform(event_id, account_id, amount)
    account = Account.find(account_id)
    account.increment!(:balance, amount)
    LedgerEntry.create!(event_id: event_id, account_id: account_id, amount: amount)
    Notifier.deliver_later(account_id)
  end
end
"#
    )
}

fn rust(n: usize) -> String {
    format!(
        r#"use axum::{{extract::State, http::StatusCode, Json}};
use rdkafka::consumer::{{CommitMode, Consumer, StreamConsumer}};
use rdkafka::Message;
use sqlx::PgPool;

#[derive(serde::Deserialize)]
pub struct PaymentEvent{n} {{
    id: String,
    account: i64,
    amount: i64,
}}

pub async fn payments_webhook_{n}(State(pool): State<PgPool>, Json(event): Json<PaymentEvent{n}>) -> StatusCode {{
    let mut tx = match pool.begin().await {{
        Ok(tx) => tx,
        Err(_) => return StatusCode::INTERNAL_SERVER_ERROR,
    }};
    let claimed = sqlx::query!("INSERT INTO processed_events (event_id) VALUES ($1) ON CONFLICT DO NOTHING", event.id)
        .execute(&mut *tx)
        .await;
    if matches!(claimed, Ok(ref r) if r.rows_affected() == 0) {{
        return StatusCode::OK;
    }}
    sqlx::query("UPDATE accounts SET balance = balance + $1 WHERE id = $2")
        .bind(event.amount)
        .bind(event.account)
        .execute(&mut *tx)
        .await
        .ok();
    tx.commit().await.ok();
    StatusCode::OK
}}

pub async fn run_{n}(consumer: StreamConsumer, pool: PgPool) -> anyhow::Result<()> {{
    loop {{
        let msg = consumer.recv().await?;
        let event: PaymentEvent{n} = serde_json::from_slice(msg.payload().unwrap_or_default())?;
        sqlx::query!("INSERT INTO payments (event_id, amount) VALUES ($1, $2)", event.id, event.amount)
            .execute(&pool)
            .await?;
        consumer.commit_message(&msg, CommitMode::Async)?;
    }}
}}
"#
    )
}
