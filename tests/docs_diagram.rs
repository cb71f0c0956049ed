//! The sequence diagram in `docs/connection-lifecycle.svg` is rendered from
//! the Mermaid source in `docs/connection-lifecycle.md` by
//! `scripts/render_sequence.py`; this test fails when the committed SVG no
//! longer matches its source (run `python3 scripts/render_sequence.py` to
//! regenerate it).

use std::io::ErrorKind;
use std::path::Path;
use std::process::Command;

#[test]
fn connection_lifecycle_svg_is_up_to_date() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let output = match Command::new("python3")
        .arg(root.join("scripts/render_sequence.py"))
        .arg("--check")
        .current_dir(root)
        .output()
    {
        Ok(output) => output,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            eprintln!("skipped: python3 is not installed, so the diagram cannot be checked");
            return;
        }
        Err(e) => panic!("cannot run python3: {e}"),
    };
    assert!(
        output.status.success(),
        "scripts/render_sequence.py --check failed ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
}
