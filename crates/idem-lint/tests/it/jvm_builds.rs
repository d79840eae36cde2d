//! One repository holding several services built apart (`members-service/src/…`,
//! `invites-service/src/…`), each with its own copy of an interface and its implementation: a
//! call through the interface is followed into the caller's own build's implementation.

use std::path::Path;

use idem_lint::Linter;

fn service(root: &Path, svc: &str, listener: &str) {
    let dir = root.join(svc).join("src/main/java/com/acme");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(
        dir.join("SeenMessages.java"),
        "public interface SeenMessages {\n    boolean wasSeen(String id);\n}\n",
    )
    .expect("write");
    std::fs::write(
        dir.join("SeenMessagesCacheImpl.java"),
        r##"@Service
public class SeenMessagesCacheImpl implements SeenMessages {
    @Cacheable(value = "seen-messages", key = "#id")
    public boolean wasSeen(String id) {
        return false;
    }
}
"##,
    )
    .expect("write");
    std::fs::write(dir.join("Listener.java"), listener).expect("write");
}

const LISTENER: &str = r#"@Component
public class Listener {
    private final SeenMessages seenMessages;
    private final MemberRepository memberRepository;

    @KafkaListener(topics = "members")
    public void onMember(MemberJoined event) {
        if (seenMessages.wasSeen(event.messageId())) {
            return;
        }
        memberRepository.save(new Member(event.email()));
    }
}
"#;

#[test]
fn an_interface_implemented_once_per_build_is_followed_into_the_callers_build() {
    let d = tempfile::tempdir().expect("tmp");
    service(d.path(), "members-service", LISTENER);
    service(d.path(), "invites-service", LISTENER);
    let report = Linter::new()
        .scan(&[d.path().to_path_buf()])
        .expect("scans");
    let ttl: Vec<_> = (report.findings.iter())
        .filter(|f| f.rule.as_str() == "REL_TTL_MARKER")
        .collect();
    assert_eq!(ttl.len(), 2, "{:#?}", report.findings);
}
