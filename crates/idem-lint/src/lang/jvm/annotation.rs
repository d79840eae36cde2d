//! Annotations as the checks read them: Spring and JAX-RS route and listener annotations
//! become the function's registrations (`PostMapping /webhooks/stripe`, `KafkaListener
//! orders`), `@Transactional` opens a transaction around the method's body.

use crate::ir::{Expr, Pos};

/// One annotation as written: its simple name (`Transactional` for
/// `@org.springframework.transaction.annotation.Transactional`) and its arguments (a lone
/// value under the key `value`).
#[derive(Debug, Clone)]
pub(crate) struct Annotation {
    pub(crate) name: String,
    pub(crate) args: Vec<(String, Expr)>,
    /// Where it is written.
    pub(crate) pos: Pos,
}

impl Annotation {
    /// An annotation named `name` (qualified or not).
    pub(crate) fn new(name: &str, args: Vec<(String, Expr)>, pos: Pos) -> Self {
        // A one-element array is its element (`queues = ["payments"]`, `topics = {"orders"}`).
        let args = args
            .into_iter()
            .map(|(k, v)| match v {
                Expr::List(mut items) if items.len() == 1 => (k, items.remove(0)),
                v => (k, v),
            })
            .collect();
        Annotation {
            name: name.rsplit('.').next().unwrap_or(name).to_string(),
            args,
            pos,
        }
    }

    fn arg(&self, key: &str) -> Option<&Expr> {
        self.args.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The strings of its arguments (route paths, topics, queues), in order.
    fn strings(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (_, v) in &self.args {
            v.walk(&mut |e| {
                if let Some(s) = e.string_text() {
                    out.push(s);
                }
            });
        }
        out
    }

    /// Whether the last segment of a constant argument is `word` (`phase =
    /// TransactionPhase.AFTER_COMMIT`, `propagation = Propagation.REQUIRES_NEW`).
    fn constant_is(&self, key: &str, words: &[&str]) -> bool {
        let mut found = false;
        if let Some(v) = self.arg(key) {
            v.walk(&mut |e| {
                if let Expr::Path(p) = e {
                    found |= p.last().is_some_and(|l| words.contains(&l.as_str()));
                }
            });
        }
        found
    }
}

/// JAX-RS's (Quarkus's) and Micronaut's HTTP method annotations.
const HTTP_METHODS: &[&str] = &[
    "POST", "PUT", "PATCH", "DELETE", "GET", "Post", "Put", "Patch", "Delete", "Get",
];

/// Annotations of methods that consume messages or events, whatever the framework: Spring's
/// listeners and handlers, Quarkus/SmallRye `@Incoming`, Micronaut's `@Topic`/`@Queue`,
/// Spring Integration's `@ServiceActivator`, Axon's `@EventHandler`.
const CONSUMING: &[&str] = &[
    "KafkaListener",
    "KafkaHandler",
    "RabbitListener",
    "RabbitHandler",
    "JmsListener",
    "SqsListener",
    "StreamListener",
    "Incoming",
    "Topic",
    "Queue",
    "ServiceActivator",
    "EventHandler",
    "SagaEventHandler",
    "NatsListener",
    "PulsarListener",
    "EventListener",
    "ApplicationModuleListener",
];

/// How a method's annotations run it: the registrations checks read and whether a
/// transaction is open around its body.
#[derive(Debug, Default)]
pub(crate) struct MethodRole {
    pub(crate) registrations: Vec<String>,
    pub(crate) transactional: bool,
    /// The transaction joins one open where the method is called (propagation `REQUIRED`,
    /// the default; `REQUIRES_NEW` and `NESTED` commit apart).
    pub(crate) joins: bool,
}

/// Reads a method's annotations under its class's (`@RequestMapping("/webhooks")` on the class
/// prefixes `@PostMapping("/stripe")`, `@Path` likewise for JAX-RS; a class's
/// `@Transactional` covers its methods unless a method's own says otherwise).
pub(crate) fn method_role(class: &[Annotation], method: &[Annotation]) -> MethodRole {
    let prefix = class
        .iter()
        .find(|a| matches!(a.name.as_str(), "RequestMapping" | "Path" | "Controller"))
        .and_then(|a| a.strings().into_iter().next())
        .unwrap_or_default();
    let mut role = MethodRole::default();
    let jaxrs_path = method
        .iter()
        .find(|a| a.name == "Path")
        .and_then(|a| a.strings().into_iter().next())
        .unwrap_or_default();
    for a in method {
        let strings = a.strings();
        if a.name.ends_with("Mapping") {
            let path = strings.first().cloned().unwrap_or_default();
            role.registrations
                .push(format!("{} {prefix}{path}", a.name).trim_end().to_string());
        } else if HTTP_METHODS.contains(&a.name.as_str()) {
            // JAX-RS takes the path from `@Path`, Micronaut from the annotation itself.
            let path = strings.first().unwrap_or(&jaxrs_path);
            role.registrations.push(
                format!("HttpMethod {} {prefix}{path}", a.name.to_uppercase())
                    .trim_end()
                    .to_string(),
            );
        } else if !matches!(a.name.as_str(), "Path" | "Override" | "Transactional") {
            let mut reg = a.name.clone();
            for s in strings {
                reg.push(' ');
                reg.push_str(&s);
            }
            if CONSUMING.contains(&a.name.as_str()) {
                reg.push_str(" (consumes messages)");
            }
            role.registrations.push(reg);
        }
    }
    let own = method.iter().find(|a| a.name == "Transactional");
    let tx = own.or_else(|| class.iter().find(|a| a.name == "Transactional"));
    role.joins = tx.is_some_and(|a| {
        !a.constant_is("propagation", &["REQUIRES_NEW", "NESTED"])
            && !a.constant_is("value", &["REQUIRES_NEW", "NESTED"])
    });
    // `@Transactional("kafkaTransactionManager")`: a broker's transaction, not a database's.
    let broker_tx = tx.is_some_and(|a| {
        a.strings().iter().any(|s| {
            ["kafka", "rabbit", "jms"]
                .iter()
                .any(|b| s.to_lowercase().contains(b))
        })
    });
    role.transactional = !broker_tx
        && tx.is_some_and(|a| {
            !a.constant_is("propagation", &["NOT_SUPPORTED", "NEVER", "SUPPORTS"])
                && !a.constant_is("value", &["NOT_SUPPORTED", "NEVER", "SUPPORTS"])
        });
    // `@TransactionalEventListener` runs after the publisher's commit (AFTER_COMMIT, the
    // default phase) outside its transaction; BEFORE_COMMIT runs inside it.
    if let Some(l) = method
        .iter()
        .find(|a| a.name == "TransactionalEventListener")
    {
        role.transactional |= l.constant_is("phase", &["BEFORE_COMMIT"]);
        role.registrations.push("after commit".to_string());
    }
    role
}
