//! The layer order of docs/architecture.md ("Layers"), checked against the source: every
//! `crate::` path in code (tests aside) runs to its own layer or a lower one, the modules of a
//! layer import each other in no loop, and every top-level module is in the list. Inside a
//! folder too, its modules import each other in no loop.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The layers as the doc lists them: module name to layer number.
fn layers() -> BTreeMap<String, usize> {
    let doc = std::fs::read_to_string(Path::new(ROOT).join("docs/architecture.md")).unwrap();
    let section = doc
        .split("\n## Layers\n")
        .nth(1)
        .expect("docs/architecture.md has a \"## Layers\" section");
    let mut layers = BTreeMap::new();
    for line in section.lines().take_while(|l| !l.starts_with("## ")) {
        let Some((number, rest)) = line.split_once(". **") else {
            continue;
        };
        let Ok(n) = number.parse::<usize>() else {
            continue;
        };
        for module in rest.split('`').skip(1).step_by(2) {
            assert!(
                layers.insert(module.to_owned(), n).is_none(),
                "{module} is listed twice"
            );
        }
    }
    assert!(layers.len() > 10, "no layers read from the doc: {layers:?}");
    layers
}

/// Source files that are not test modules.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if name != "tests" {
                sources(&path, out);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" {
            out.push(path);
        }
    }
}

/// Each `crate::MODULE` a line of code names (comments skipped), with where.
fn imports(top: &str, path: &Path) -> Vec<(String, usize)> {
    let text = std::fs::read_to_string(path).unwrap();
    let code = text
        .split("#[cfg(test)]\nmod tests {")
        .next()
        .unwrap_or_default();
    let mut found = vec![];
    for (i, line) in code.lines().enumerate() {
        if line.trim_start().starts_with("//") {
            continue;
        }
        for (at, _) in line.match_indices("crate::") {
            if line[..at].ends_with('$') || line[..at].ends_with(|c: char| c.is_alphanumeric()) {
                continue;
            }
            let name: String = line[at + 7..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() && name != top {
                found.push((name, i + 1));
            }
        }
    }
    found
}

#[test]
fn imports_run_down_the_layers_of_the_architecture_doc() {
    let layers = layers();
    let src = Path::new(ROOT).join("src");
    let mut files = vec![];
    sources(&src, &mut files);
    let mut problems = vec![];
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let rel = file.strip_prefix(&src).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let top = first.trim_end_matches(".rs").to_owned();
        if top == "lib" || top == "main" {
            continue;
        }
        let Some(&from) = layers.get(&top) else {
            problems.push(format!(
                "src/{}: module {top} is in no layer of docs/architecture.md",
                rel.display()
            ));
            continue;
        };
        for (to, line) in imports(&top, file) {
            let Some(&layer) = layers.get(&to) else {
                continue; // `crate::` of something that is not a module (a macro's path)
            };
            if layer > from {
                problems.push(format!(
                    "src/{}:{line}: {top} (layer {from}) imports crate::{to} (layer {layer})",
                    rel.display()
                ));
            } else if layer == from {
                edges.entry(top.clone()).or_default().insert(to);
            }
        }
    }
    problems.extend(loops(&edges, "within a layer"));
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Each loop in `edges`, in words.
fn loops(edges: &BTreeMap<String, BTreeSet<String>>, within: &str) -> Vec<String> {
    fn visit(
        m: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
        found: &mut Vec<String>,
    ) {
        if let Some(at) = path.iter().position(|p| p == m) {
            found.push(format!("{} -> {m}", path[at..].join(" -> ")));
            return;
        }
        if !done.insert(m.to_owned()) {
            return;
        }
        path.push(m.to_owned());
        for next in edges.get(m).into_iter().flatten() {
            visit(next, edges, path, done, found);
        }
        path.pop();
    }
    let (mut done, mut found) = (BTreeSet::new(), vec![]);
    for m in edges.keys() {
        visit(m, edges, &mut vec![], &mut done, &mut found);
    }
    found
        .into_iter()
        .map(|l| format!("a loop {within}: {l}"))
        .collect()
}

#[test]
fn the_modules_of_a_folder_import_each_other_in_no_loop() {
    let src = Path::new(ROOT).join("src");
    let mut files = vec![];
    sources(&src, &mut files);
    let is_module = |folder: &str, name: &str| {
        src.join(folder).join(format!("{name}.rs")).exists() || src.join(folder).join(name).is_dir()
    };
    let mut edges: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for file in &files {
        let rel = file.strip_prefix(&src).unwrap();
        let parts: Vec<String> = rel
            .components()
            .map(|c| {
                c.as_os_str()
                    .to_string_lossy()
                    .trim_end_matches(".rs")
                    .to_owned()
            })
            .collect();
        if parts.len() < 2 {
            continue;
        }
        let (folder, me) = (&parts[0], &parts[1]);
        let text = std::fs::read_to_string(file).unwrap();
        let code = text
            .split("#[cfg(test)]\nmod tests {")
            .next()
            .unwrap_or_default();
        for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
            let mut named = vec![];
            let prefix = format!("crate::{folder}::");
            for (at, _) in line.match_indices(&prefix) {
                named.push(&line[at + prefix.len()..]);
            }
            // A file right in the folder names its siblings as `super::`.
            if parts.len() == 2 {
                for (at, _) in line.match_indices("super::") {
                    if !line[..at].ends_with("super::") {
                        named.push(&line[at + 7..]);
                    }
                }
            }
            for rest in named {
                let other: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if other != *me && !other.is_empty() && is_module(folder, &other) {
                    edges
                        .entry(folder.clone())
                        .or_default()
                        .entry(me.clone())
                        .or_default()
                        .insert(other);
                }
            }
        }
    }
    let problems: Vec<String> = edges
        .iter()
        .flat_map(|(folder, e)| loops(e, &format!("in src/{folder}/")))
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
