//! What the JVM's clients and frameworks call things, for the language-neutral analysis and
//! checks: Spring Data's derived queries, Spring's messaging templates, `RestTemplate`, the
//! Stripe Java SDK's resources, Jackson and Gson serialisation, the RabbitMQ client's acks
//! and the consumer settings that acknowledge on receipt.

use crate::ir::{Call, Expr, Function};
use crate::words::norm;

/// A Spring Data derived query that reads (`existsByEventId`, `findFirstByOrderId`,
/// `countByStatus`, `getReferenceById`).
pub(crate) fn is_derived_read(method: &str) -> bool {
    let m = method.to_ascii_lowercase();
    [
        "existsby",
        "countby",
        "findfirstby",
        "findtopby",
        "findallby",
        "readby",
        "queryby",
    ]
    .iter()
    .any(|p| m.starts_with(p))
        || m == "getreferencebyid"
        // MyBatis-Plus's `BaseMapper`.
        || matches!(
            m.as_str(),
            "selectbyid" | "selectone" | "selectlist" | "selectcount" | "selectbymap"
        )
        || m.starts_with("find")
            && m.contains("by")
            && !m.contains("and")
            && m.len() > 6
            && !m.starts_with("findand")
}

/// A save that stores a loaded or built entity as `save` does (`saveAndFlush`).
pub(crate) fn is_save(method: &str) -> bool {
    matches!(method, "saveandflush" | "persistandflush")
}

/// A row built by a builder (`Payment.builder().eventId(id).build()`).
pub(crate) fn built_by_builder(c: &Call) -> bool {
    c.method() == "build" && c.callee.iter().any(|s| s == "builder")
}

/// The class a Lombok builder builds (`ProcessedEvent.builder().eventId(id).build()` →
/// `ProcessedEvent`), when the chain starts at it.
pub(crate) fn builder_model(c: &Call) -> Option<String> {
    if !built_by_builder(c) {
        return None;
    }
    let at = c.callee.iter().position(|s| s == "builder")?;
    let model = c.callee.get(at.checked_sub(1)?)?;
    model
        .starts_with(|ch: char| ch.is_ascii_uppercase())
        .then(|| model.clone())
}

/// Spring's messaging templates' sends (`rabbitTemplate.convertAndSend`,
/// `jmsTemplate.convertAndSend`, `kafkaTemplate.sendDefault`).
pub(crate) fn is_publish(method: &str, recv: &str) -> bool {
    matches!(
        method,
        "convertandsend" | "convertsendandreceive" | "senddefault" | "sendandreceive"
            // The RabbitMQ Java client's `channel.basicPublish(exchange, key, props, body)`.
            | "basicpublish"
    ) && !recv.is_empty()
        || method == "send"
            && [
                "jms",
                "template",
                "bridge",
                "outputchannel",
                "messagechannel",
                "sendto",
            ]
            .iter()
            .any(|w| norm(recv).contains(w))
            && !norm(recv).contains("rest")
}

/// `RestTemplate`'s and `RestClient`'s creating requests (`postForObject`, `exchange(url,
/// HttpMethod.POST, …)`).
pub(crate) fn is_http_create(call: &Call, method: &str) -> bool {
    match method {
        "postforobject" | "postforentity" | "postforlocation" | "patchforobject" => true,
        "exchange" => call.args.iter().take(3).any(|a| {
            matches!(a, Expr::Path(p) if p.last().is_some_and(|m| matches!(m.as_str(), "POST" | "PUT" | "PATCH")))
        }),
        _ => false,
    }
}

/// The Stripe Java SDK's resources, whose static `create` calls Stripe (`Refund.create(params)`).
const STRIPE_RESOURCES: &[&str] = &[
    "Refund",
    "Charge",
    "PaymentIntent",
    "Transfer",
    "Payout",
    "Customer",
    "Subscription",
    "Invoice",
    "Session",
    "SetupIntent",
    "InvoiceItem",
    "UsageRecord",
];

/// `Refund.create(params)`, `PaymentIntent.create(params, options)`: positional arguments
/// only, so that a Rails model of the same name (`Charge.create!(stripe_id: id)`, keyword
/// arguments) stays a database write.
pub(crate) fn is_stripe_create(call: &Call) -> bool {
    call.callee.len() == 2
        && STRIPE_RESOURCES.contains(&call.callee[0].as_str())
        && call.method() == "create"
        && !call.args.is_empty()
        && call.kwargs.is_empty()
}

/// Jackson's, Gson's, kotlinx.serialization's and Vert.x's (`JsonObject.mapFrom(body)`)
/// re-serialisation of a parsed value.
pub(crate) fn reserialises(method: &str) -> bool {
    matches!(
        method,
        "writevalueasstring" | "writevalueasbytes" | "tojson" | "encodetostring" | "mapfrom"
    )
}

/// Whether `name` is a parameter bound from a parsed request body (`@RequestBody
/// Map<String, Object> body`, `@RequestBody StripeEvent event`): any type but the raw
/// `String` or `byte[]`.
pub(crate) fn parsed_body_param(func: &Function, name: &str) -> bool {
    func.params
        .iter()
        .position(|p| p == name)
        .and_then(|i| func.param_types.get(i))
        .is_some_and(|t| {
            let t = t.trim();
            t.starts_with("RequestBody")
                && !matches!(
                    t.trim_start_matches("RequestBody").trim(),
                    "String" | "byte[]" | "ByteArray" | "String?" | ""
                )
        })
}

/// `container.setAcknowledgeMode(AcknowledgeMode.NONE)`, lowered as a bean property set
/// (`container.acknowledgeMode = AcknowledgeMode.NONE`): Spring AMQP's listener container
/// acknowledging on receipt.
pub(crate) fn ack_mode_none(target: &str, value: &Expr) -> bool {
    let property = target.rsplit('.').next().unwrap_or(target);
    norm(property) == "acknowledgemode"
        && match value {
            Expr::Path(p) => p.last().is_some_and(|s| s == "NONE"),
            Expr::Str(s) => s.eq_ignore_ascii_case("none"),
            _ => false,
        }
}

/// A JVM consumer set to acknowledge on receipt or to commit offsets on a timer: the RabbitMQ
/// client's `basicConsume(queue, true, …)`, Spring AMQP's `ackMode = "NONE"` /
/// `acknowledge-mode: none`, Kafka's `enable.auto.commit` put into consumer properties.
pub(crate) fn auto_ack(call: &Call) -> Option<&'static str> {
    let truthy = |e: &Expr| match e {
        Expr::Path(p) => p.last().is_some_and(|s| s == "true"),
        Expr::Str(s) => s == "true",
        _ => false,
    };
    let m = call.method();
    if m == "basicconsume" && call.args.len() >= 3 && call.args.get(1).is_some_and(truthy) {
        return Some("acknowledges on receipt (autoAck true)");
    }
    let none = |e: &Expr| {
        let mut found = false;
        e.walk(&mut |x| match x {
            Expr::Str(s) => found |= s.eq_ignore_ascii_case("none"),
            Expr::Path(p) => found |= p.last().is_some_and(|s| s == "NONE"),
            _ => {}
        });
        found
    };
    // Spring Cloud AWS: `deletionPolicy = ALWAYS` / `acknowledgementMode = "ALWAYS"` deletes
    // the message even when the listener failed.
    let always = |e: &Expr| {
        let mut found = false;
        e.walk(&mut |x| match x {
            Expr::Str(s) => found |= s.eq_ignore_ascii_case("always"),
            Expr::Path(p) => found |= p.last().is_some_and(|s| s == "ALWAYS"),
            _ => {}
        });
        found
    };
    if call.kwargs.iter().any(|(k, v)| {
        matches!(norm(k).as_str(), "deletionpolicy" | "acknowledgementmode") && always(v)
    }) {
        return Some("deletes the message whether or not handling succeeded (ALWAYS)");
    }
    if call
        .kwargs
        .iter()
        .any(|(k, v)| matches!(norm(k).as_str(), "ackmode" | "acknowledgemode") && none(v))
        || m == "setacknowledgemode" && call.args.first().is_some_and(none)
    {
        return Some("acknowledges on receipt (acknowledge mode NONE)");
    }
    let auto_commit_key = |e: &Expr| match e {
        Expr::Str(s) => s == "enable.auto.commit",
        Expr::Path(p) => p.last().is_some_and(|s| s == "ENABLE_AUTO_COMMIT_CONFIG"),
        _ => false,
    };
    let in_properties = call.kwargs.iter().any(|(k, v)| {
        k == "properties" && {
            let mut found = false;
            v.walk(&mut |x| {
                if let Expr::Str(s) = x {
                    found |= norm(s) == "enableautocommittrue";
                }
            });
            found
        }
    });
    if matches!(m.as_str(), "put" | "setproperty" | "to")
        && call.args.len() == 2
        && auto_commit_key(&call.args[0])
        && truthy(&call.args[1])
        || in_properties
    {
        return Some(
            "commits offsets on a timer, whether or not the message was handled (enable.auto.commit)",
        );
    }
    None
}

/// The JVM's clocks, called without arguments (`System.currentTimeMillis()`, `Instant.now()`,
/// Kotlin's `Clock.System.now()`), by their normalised names.
pub(crate) fn is_clock(name: &str) -> bool {
    matches!(
        name,
        "systemcurrenttimemillis"
            | "systemnanotime"
            | "instantnow"
            | "localdatetimenow"
            | "offsetdatetimenow"
            | "zoneddatetimenow"
            | "localdatenow"
            | "clocksystemnow"
            | "clockmillis"
            | "datetimenow"
    )
}

/// The JVM's random and per-call ids (`UUID.randomUUID()`, `RandomStringUtils.random…`,
/// `UlidCreator.getUlid()`), by their normalised names.
pub(crate) fn is_random(name: &str) -> bool {
    name == "uuidrandomuuid"
        || name.starts_with("randomstringutilsrandom")
        || name.starts_with("threadlocalrandomcurrentnext")
        || matches!(
            name,
            "ulidcreatorulid"
                | "ulidcreatorgetulid"
                | "uuidcreatorrandombased"
                | "uuidgeneratorgenerate"
        )
}

/// What a Spring Data Redis or Redisson command does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RedisCommand {
    /// A write only when the key is absent (`SET NX`).
    Claim,
    /// A read of a key.
    Read,
    /// An increment.
    Incr,
}

/// Spring Data Redis's and Redisson's commands (`opsForValue().setIfAbsent(key, v, ttl)`,
/// `hasKey`, `increment`).
pub(crate) fn redis_command(method: &str) -> Option<RedisCommand> {
    match method {
        "setifabsent" | "trysetvalue" | "tryset" | "putifabsent" => Some(RedisCommand::Claim),
        "haskey" | "ismember" => Some(RedisCommand::Read),
        "increment" | "decrement" | "incrementandget" | "addandget" => Some(RedisCommand::Incr),
        _ => None,
    }
}

/// `java.time`'s comparisons as the operators they are (`a.isAfter(b)` is `a > b`).
pub(crate) fn comparison(method: &str) -> Option<&'static str> {
    match method {
        "isAfter" => Some(">"),
        "isBefore" => Some("<"),
        _ => None,
    }
}

/// The status of Spring's `ResponseEntity.ok()` / `accepted()` / `noContent()` /
/// `badRequest()` builders, WebFlux's `ServerResponse` and JAX-RS's `Response` alike.
pub(crate) fn response_status(call: &Call) -> Option<u16> {
    // `new ResponseEntity<>(body, HttpStatus.CONFLICT)`.
    if call.is_new && call.callee.last().is_some_and(|n| n == "ResponseEntity") {
        return call.args.iter().find_map(Expr::status_code);
    }
    if let Some(code) = ktor_status(call) {
        return Some(code);
    }
    let root = call.callee.first()?;
    if !matches!(
        root.as_str(),
        "ResponseEntity" | "ServerResponse" | "Response" | "HttpResponse"
    ) || call.callee.len() != 2
    {
        return None;
    }
    Some(match call.callee[1].as_str() {
        "ok" => 200,
        "created" => 201,
        "accepted" => 202,
        "noContent" => 204,
        "badRequest" => 400,
        "notFound" => 404,
        "unprocessableEntity" => 422,
        "internalServerError" => 500,
        _ => return None,
    })
}

/// Ktor's answer: `call.respond(HttpStatusCode.Conflict, body)`, `call.respondText(text,
/// status = HttpStatusCode.OK)`; without a status it is 200.
fn ktor_status(call: &Call) -> Option<u16> {
    let [root, method] = call.callee.as_slice() else {
        return None;
    };
    if root != "call" || !method.starts_with("respond") || method == "respondRedirect" {
        return None;
    }
    let named = call.option("status").and_then(Expr::status_code);
    let first = call.args.first().and_then(|a| match a {
        Expr::Path(p) if p.first().is_some_and(|r| r == "HttpStatusCode") => a.status_code(),
        _ => None,
    });
    Some(named.or(first).unwrap_or(200))
}

/// Exposed's DAO create, `Ref.new { name = … }`: a row of the entity class's table.
pub(crate) fn is_dao_new(call: &Call) -> bool {
    matches!(call.callee.as_slice(), [entity, m] if m == "new"
        && entity.starts_with(|c: char| c.is_ascii_uppercase()))
}

/// A domain class's static factory, `InFlightTransaction.createWithPayment(…)`,
/// `Order.createFrom(event)`: a camel-case `create…` on a class builds an object and writes
/// nothing (an active record's own `Model.create(…)` keeps its bare name).
pub(crate) fn is_static_factory(call: &Call) -> bool {
    matches!(call.callee.as_slice(), [class, m]
        if class.starts_with(|c: char| c.is_ascii_uppercase())
            && m.strip_prefix("create")
                .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_uppercase())))
}

/// The JDK's and logging's calls that look like a store's (`MDC.put`, `digest.update(bytes)`,
/// `mac.update`) and a broker client's set-up (`connection.createChannel()`): no row is
/// written.
pub(crate) fn is_library_call(call: &Call) -> bool {
    let root = call.callee.first().map(|r| norm(r)).unwrap_or_default();
    let m = call.method();
    matches!(
        root.as_str(),
        "mdc" | "threadcontext" | "messagedigest" | "digest" | "md" | "mac" | "signature"
    ) || matches!(
        m.as_str(),
        "createchannel" | "createconnection" | "createconsumer" | "createproducer"
    )
}

/// Receivers of the JVM's data access besides repositories: MyBatis mappers, Spring's
/// `MongoTemplate` and R2DBC `DatabaseClient`, jOOQ's `DSLContext`.
pub(crate) fn is_data_access(receiver: &str) -> bool {
    let r = norm(receiver);
    r.ends_with("mapper") && r != "objectmapper"
        || matches!(
            r.as_str(),
            "mongotemplate"
                | "reactivemongotemplate"
                | "mongooperations"
                | "databaseclient"
                | "dsl"
                | "dslcontext"
                | "create"
        )
}

/// A MongoDB update that increments (`new Update().inc("balance", amount)`,
/// `Updates.inc("stock", -1)`).
pub(crate) fn increments(call: &Call) -> bool {
    call.args.iter().any(|a| {
        let mut found = false;
        a.walk(&mut |e| {
            if let Expr::Call(c) = e {
                found |= c.method() == "inc"
                    && c.callee
                        .first()
                        .is_some_and(|r| r == "Update" || r == "Updates");
            }
        });
        found
    })
}

/// The entity class a `MongoTemplate` call names last (`updateFirst(query, update,
/// Wallet.class)`, `findOne(query, Order.class)`).
pub(crate) fn template_entity(call: &Call) -> Option<String> {
    let root = match call.callee.as_slice() {
        [this, field, ..] if this == "this" => field,
        [root, ..] => root,
        [] => return None,
    };
    let recv = norm(root);
    if !matches!(
        recv.as_str(),
        "mongotemplate" | "reactivemongotemplate" | "mongooperations"
    ) {
        return None;
    }
    match call.args.last()? {
        Expr::Path(p) if p.len() == 1 && p[0].starts_with(|c: char| c.is_ascii_uppercase()) => {
            Some(p[0].clone())
        }
        _ => None,
    }
}

/// Jedis's and Lettuce's `SET` with `NX` given as parameters (`SetParams.setParams().nx()`,
/// `SetArgs.Builder.nx()`).
pub(crate) fn sets_nx(call: &Call) -> bool {
    call.args.iter().any(|a| {
        let mut found = false;
        a.walk(&mut |e| {
            if let Expr::Call(c) = e {
                found |= c.callee.iter().any(|s| s == "nx");
            }
        });
        found
    })
}

/// The JVM's Redis clients not named for Redis (`jedis`, Lettuce's `lettuce` connections).
pub(crate) fn is_redis_client(receiver: &str) -> bool {
    let r = norm(receiver);
    r.contains("jedis") || r.contains("lettuce")
}

/// The payload of a JVM HMAC computation: `mac.doFinal(body)` / `mac.update(body)` on a
/// `Mac.getInstance("HmacSHA256")`, Commons Codec's `HmacUtils.hmacSha256Hex(key, body)` and
/// `new HmacUtils(algorithm, key).hmacHex(body)`.
pub(crate) fn hmac_payload<'c>(
    call: &'c Call,
    values: &std::collections::HashMap<String, Expr>,
) -> Option<&'c Expr> {
    let m = call.method();
    let root = call.callee.first()?;
    let made_by_mac = |name: &str| match values.get(name) {
        Some(Expr::Call(c)) => {
            let n = norm(&c.name());
            n.contains("macgetinstance") || n.contains("hmacutils")
        }
        // A field of commons-codec's type (`private final HmacUtils hmacUtils;`, a bean).
        Some(Expr::Object {
            type_name: Some(t), ..
        }) => matches!(norm(t).as_str(), "hmacutils" | "mac"),
        _ => false,
    };
    match m.as_str() {
        "dofinal" | "update" if call.args.len() == 1 && call.callee.len() == 2 => {
            made_by_mac(root).then(|| &call.args[0])
        }
        "hmachex" | "hmac" if call.args.len() == 1 => {
            (made_by_mac(root) || root == "HmacUtils").then(|| &call.args[0])
        }
        _ if root == "HmacUtils" && m.starts_with("hmacsha") && call.args.len() == 2 => {
            call.args.get(1)
        }
        _ => None,
    }
}
