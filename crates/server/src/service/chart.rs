//! The files of a Helm chart artifact that Harbor's chart additions show
//! (`values.yaml`, `readme.md`, `dependencies`): read from the chart's layer,
//! a .tgz of the chart directory, within size bounds.

use std::io::Read;

use berth_domain::oci::manifest::Descriptor;
use serde::{Deserialize, Serialize};

use crate::state::AppState;

/// The media type of a Helm chart's content layer.
pub const CHART_LAYER: &str = "application/vnd.cncf.helm.chart.content.v1.tar+gzip";
/// The largest chart archive read (Helm's own loader refuses much less).
const MAX_CHART_BYTES: u64 = 16 << 20;
/// The most bytes unpacked from one archive while looking for its files,
/// whatever its compressed size (a gzip bomb stops here).
const MAX_UNPACKED_BYTES: u64 = 64 << 20;
/// The largest file kept from an archive.
const MAX_FILE_BYTES: u64 = 1 << 20;

/// The chart directory's files the additions read; `None` where the chart
/// has no such file (or one over [`MAX_FILE_BYTES`], or not UTF-8).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ChartFiles {
    /// `values.yaml`.
    pub values: Option<String>,
    /// `README.md` (any case).
    pub readme: Option<String>,
    /// `Chart.yaml`.
    pub chart: Option<String>,
    /// `requirements.yaml` (charts of Helm's API version v1).
    pub requirements: Option<String>,
}

/// The files of the chart whose content layer is `layer`; `None` when the
/// layer cannot be read (missing, over [`MAX_CHART_BYTES`]) or is no .tgz.
pub async fn read_chart(state: &AppState, layer: &Descriptor) -> Option<ChartFiles> {
    let archive = super::content::read_bounded(state, layer, MAX_CHART_BYTES).await?;
    tokio::task::spawn_blocking(move || chart_files(&archive))
        .await
        .ok()?
}

/// The files of a chart archive (`<chart>/values.yaml`, ... at its top
/// level; subcharts under `<chart>/charts/` are not the chart's own).
pub fn chart_files(archive: &[u8]) -> Option<ChartFiles> {
    let unpacked = flate2::read::GzDecoder::new(archive).take(MAX_UNPACKED_BYTES);
    let mut entries = tar::Archive::new(unpacked);
    let mut files = ChartFiles::default();
    for entry in entries.entries().ok()? {
        let mut entry = entry.ok()?;
        let path = entry.path().ok()?.into_owned();
        let parts: Vec<_> = path.components().collect();
        let [_, name] = parts.as_slice() else {
            continue;
        };
        let name = name.as_os_str().to_string_lossy().into_owned();
        let slot = match name.as_str() {
            "values.yaml" => &mut files.values,
            "Chart.yaml" => &mut files.chart,
            "requirements.yaml" => &mut files.requirements,
            _ if name.eq_ignore_ascii_case("readme.md") => &mut files.readme,
            _ => continue,
        };
        if slot.is_some() || entry.size() > MAX_FILE_BYTES {
            continue;
        }
        let mut text = String::new();
        if entry.read_to_string(&mut text).is_ok() {
            *slot = Some(text);
        }
    }
    Some(files)
}

/// One dependency of a chart, as Helm's `chart.Dependency` marshals it
/// (Harbor's `dependencies` addition is the list of these).
#[derive(Debug, Deserialize, Serialize, PartialEq)]
pub struct Dependency {
    name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    version: String,
    #[serde(default)]
    repository: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    condition: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    tags: Vec<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    enabled: bool,
    #[serde(
        default,
        rename = "import-values",
        skip_serializing_if = "Vec::is_empty"
    )]
    import_values: Vec<serde_json::Value>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    alias: String,
}

#[derive(Deserialize)]
struct Dependencies {
    #[serde(default)]
    dependencies: Option<Vec<Dependency>>,
}

impl ChartFiles {
    /// The chart's dependencies: `Chart.yaml`'s, else (API version v1)
    /// `requirements.yaml`'s; `None` when the file naming them is not YAML
    /// of that shape.
    pub fn dependencies(&self) -> Option<Vec<Dependency>> {
        let listed = |text: &Option<String>| -> Option<Option<Vec<Dependency>>> {
            match text {
                None => Some(None),
                Some(text) => serde_yaml_ng::from_str::<Dependencies>(text)
                    .ok()
                    .map(|d| d.dependencies),
            }
        };
        match listed(&self.chart)? {
            Some(dependencies) => Some(dependencies),
            None => Some(listed(&self.requirements)?.unwrap_or_default()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn archive(files: &[(&str, &[u8])]) -> Vec<u8> {
        let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        let mut builder = tar::Builder::new(gz);
        for (path, bytes) in files {
            let mut header = tar::Header::new_gnu();
            header.set_size(bytes.len() as u64);
            header.set_mode(0o644);
            header.set_cksum();
            builder.append_data(&mut header, path, *bytes).unwrap();
        }
        builder.into_inner().unwrap().finish().unwrap()
    }

    #[test]
    fn top_level_files_are_read_and_subcharts_ignored() {
        let tgz = archive(&[
            ("demo/Chart.yaml", b"apiVersion: v2\nname: demo\ndependencies:\n  - name: redis\n    version: 17.0.0\n    repository: https://charts.example\n    condition: redis.enabled\n"),
            ("demo/values.yaml", b"replicas: 1\n"),
            ("demo/charts/redis/values.yaml", b"sub: true\n"),
            ("demo/Readme.md", b"# Demo\n"),
        ]);
        let files = chart_files(&tgz).unwrap();
        assert_eq!(files.values.as_deref(), Some("replicas: 1\n"));
        assert_eq!(files.readme.as_deref(), Some("# Demo\n"));
        let dependencies = serde_json::to_value(files.dependencies().unwrap()).unwrap();
        assert_eq!(
            dependencies,
            serde_json::json!([{"name": "redis", "version": "17.0.0", "repository": "https://charts.example", "condition": "redis.enabled"}])
        );
        assert!(chart_files(b"not gzip").is_none());
    }

    #[test]
    fn a_v1_chart_names_its_dependencies_in_requirements() {
        let tgz = archive(&[
            ("old/Chart.yaml", b"apiVersion: v1\nname: old\n"),
            (
                "old/requirements.yaml",
                b"dependencies:\n- name: db\n  repository: file://../db\n",
            ),
        ]);
        let deps = chart_files(&tgz).unwrap().dependencies().unwrap();
        assert_eq!(
            serde_json::to_value(deps).unwrap(),
            serde_json::json!([{"name": "db", "repository": "file://../db"}])
        );
        let none = chart_files(&archive(&[("x/Chart.yaml", b"name: x\n")])).unwrap();
        assert_eq!(none.dependencies(), Some(Vec::new()));
        assert_eq!(none.values, None);
    }

    #[test]
    fn a_file_over_the_bound_is_not_kept() {
        let big = vec![b'a'; (MAX_FILE_BYTES + 1) as usize];
        let files = chart_files(&archive(&[("c/values.yaml", &big)])).unwrap();
        assert_eq!(files.values, None);
    }
}
