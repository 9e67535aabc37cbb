-- listArtifactsOfProject (GET /projects/{project}/artifacts): the artifacts of
-- every repository of a project in the listing's order, one range per project
-- as artifacts_listed_idx (0010) holds them per repository.
CREATE INDEX artifacts_project_listed_idx ON artifacts (project_id, listed, push_time, id);
