//! The Java client: Apache Kafka's `kafka-clients` jar driven by the Java
//! peer (`tests/java/Peer.java`, modes `census-consumer` and
//! `census-producer`), compiled by the bench into its own directory
//! under the target directory (the copy `scripts/kafka.sh` compiles for
//! the tests is left alone), and run by `java` with the JVM's defaults
//! (plus `LAZYKAFKA_BENCH_JAVA_OPTS`, split at spaces) on a class path of
//! the client and what it needs only: `kafka-clients`, lz4, snappy, zstd
//! and the SLF4J API (no binding: the no-operation logger).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// How to run the Java peer.
pub(crate) struct Java {
    classpath: String,
    opts: Vec<String>,
    /// `java -version`'s first line.
    pub(crate) version: String,
}

/// The jars of Apache Kafka's release that the bench uses: a Kafka
/// release's `lib` directory (`scripts/kafka.sh`'s, from
/// `LAZYKAFKA_KAFKA_BIN` and `LAZYKAFKA_KAFKA_VERSION`, else the first
/// `.kafka/*/lib` of the crate with a `kafka-clients` jar).
fn kafka_lib() -> Option<PathBuf> {
    let var = |n: &str| std::env::var(n).ok().filter(|v| !v.is_empty());
    if let (Some(bin), Some(version)) = (var("LAZYKAFKA_KAFKA_BIN"), var("LAZYKAFKA_KAFKA_VERSION"))
    {
        let lib = Path::new(&bin).parent()?.join(version).join("lib");
        if lib.is_dir() {
            return Some(lib);
        }
    }
    let home = Path::new(env!("CARGO_MANIFEST_DIR")).join(".kafka");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(home)
        .ok()?
        .filter_map(|e| Some(e.ok()?.path().join("lib")))
        .filter(|lib| jar(lib, "kafka-clients-").is_some())
        .collect();
    dirs.sort();
    dirs.pop()
}

/// The jar of `lib` whose name starts with `prefix`.
fn jar(lib: &Path, prefix: &str) -> Option<PathBuf> {
    std::fs::read_dir(lib)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix) && n.ends_with(".jar"))
        })
}

impl Java {
    /// The Java client, ready to run; `Err` with the reason when it
    /// cannot be (`LAZYKAFKA_BENCH_JAVA=0`, no `java` or `javac`, no
    /// Kafka jars, the peer does not compile).
    pub(crate) fn find() -> Result<Java, String> {
        if std::env::var("LAZYKAFKA_BENCH_JAVA").as_deref() == Ok("0") {
            return Err("LAZYKAFKA_BENCH_JAVA=0".into());
        }
        let lib = kafka_lib().ok_or("no Kafka jars (run scripts/kafka.sh install)")?;
        let classes = compile(&lib)?;
        let mut classpath = vec![classes.display().to_string()];
        for prefix in [
            "kafka-clients-",
            "lz4-java-",
            "snappy-java-",
            "zstd-jni-",
            "slf4j-api-",
        ] {
            let j = jar(&lib, prefix).ok_or_else(|| format!("no {prefix}*.jar in {lib:?}"))?;
            classpath.push(j.display().to_string());
        }
        let version = Command::new("java")
            .arg("-version")
            .output()
            .map_err(|e| format!("java: {e}"))?;
        let version = String::from_utf8_lossy(&version.stderr)
            .lines()
            .next()
            .unwrap_or("")
            .to_owned();
        let opts = std::env::var("LAZYKAFKA_BENCH_JAVA_OPTS")
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        Ok(Java {
            classpath: classpath.join(":"),
            opts,
            version,
        })
    }

    /// `java ... Peer MODE args...`.
    pub(crate) fn command(&self, mode: &str, args: &[String]) -> Command {
        let mut c = Command::new("java");
        c.args(&self.opts)
            .arg("-cp")
            .arg(&self.classpath)
            .arg("Peer")
            .arg(mode)
            .args(args);
        c
    }

    /// The JVM options given (`LAZYKAFKA_BENCH_JAVA_OPTS`), for the report.
    pub(crate) fn opts(&self) -> String {
        self.opts.join(" ")
    }
}

/// Compiles `tests/java/Peer.java` against `lib` into the bench's own
/// directory (beside this binary's target directory) unless the classes
/// there are newer; returns that directory.
fn compile(lib: &Path) -> Result<PathBuf, String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java/Peer.java");
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    // target/release/deps/compare-… → target/bench-java-peer
    let target = exe
        .ancestors()
        .nth(3)
        .ok_or("no target directory")?
        .to_path_buf();
    let out = target.join("bench-java-peer");
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if let (Some(class), Some(source)) = (modified(&out.join("Peer.class")), modified(&src)) {
        if class >= source {
            return Ok(out);
        }
    }
    // Compiled beside, then moved in place: a run alongside never sees
    // half a directory.
    let tmp = target.join(format!("bench-java-peer.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(|e| e.to_string())?;
    let built = Command::new("javac")
        .args(["-nowarn", "-d"])
        .arg(&tmp)
        .arg("-cp")
        .arg(format!("{}/*", lib.display()))
        .arg(&src)
        .stdout(Stdio::null())
        .output()
        .map_err(|e| format!("javac: {e}"))?;
    if !built.status.success() {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(format!(
            "javac {}: {}",
            src.display(),
            String::from_utf8_lossy(&built.stderr)
        ));
    }
    let _ = std::fs::remove_dir_all(&out);
    std::fs::rename(&tmp, &out).map_err(|e| e.to_string())?;
    Ok(out)
}
