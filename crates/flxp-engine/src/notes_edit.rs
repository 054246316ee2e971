//! One edit of a node's notes (the `description` of `GET/PUT /nodes/{node}/config`), as flxp's
//! marks make them: read, change, write back with the config's `digest`, so an admin's edit made
//! meanwhile is never overwritten; on a digest mismatch the notes are read again and the change
//! made once more.

use flxp_pve::Pve;
use flxp_pve::types::NodeConfigUpdate;

/// Applies `change` to the notes of `node` (`None` from it: nothing to change); `Ok(true)` when
/// the notes were written. Empty notes are deleted rather than written empty.
pub(crate) async fn edit(
    api: &Pve,
    node: &str,
    change: impl Fn(&str) -> Option<String>,
) -> Result<bool, flxp_pve::Error> {
    let mut retried = false;
    loop {
        let config = api.node_config(node).await?;
        let text = config.description.unwrap_or_default();
        let Some(new) = change(&text) else {
            return Ok(false);
        };
        let update = NodeConfigUpdate {
            description: (!new.is_empty()).then(|| new.clone()),
            delete: new.is_empty().then(|| "description".to_owned()),
            digest: config.digest,
        };
        match api.update_node_config(node, &update).await {
            Ok(()) => return Ok(true),
            Err(e) if e.is_checksum_mismatch() && !retried => {
                tracing::info!(node, "node notes changed meanwhile: reading them again");
                retried = true;
            }
            Err(e) => return Err(e),
        }
    }
}

/// The notes without the lines `is_mark` picks, and with `line` added at the end when given;
/// `None` when nothing changes. The admin's text is kept as it is.
pub(crate) fn with_line(
    text: &str,
    is_mark: impl Fn(&str) -> bool,
    line: Option<&str>,
) -> Option<String> {
    let mut lines: Vec<&str> = text.lines().filter(|l| !is_mark(l)).collect();
    if let Some(new) = line {
        while lines.last().is_some_and(|l| l.trim().is_empty()) {
            lines.pop();
        }
        lines.push(new);
    }
    let out = lines.join("\n");
    (out.trim_end() != text.trim_end()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_replaces_its_mark_and_keeps_the_rest() {
        let is_mark = |l: &str| l.starts_with("<!-- m ");
        assert_eq!(
            with_line("Rack 4\n<!-- m 1 -->\n\n", is_mark, Some("<!-- m 2 -->")).as_deref(),
            Some("Rack 4\n<!-- m 2 -->")
        );
        assert_eq!(
            with_line("Rack 4\n<!-- m 1 -->", is_mark, Some("<!-- m 1 -->")),
            None
        );
        assert_eq!(
            with_line("Rack 4\n<!-- m 1 -->", is_mark, None).as_deref(),
            Some("Rack 4")
        );
        assert_eq!(with_line("Rack 4", is_mark, None), None);
    }
}
