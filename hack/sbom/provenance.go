package main

// An in-toto Statement v1 with a SLSA v1 provenance predicate: the fields
// this provenance uses.
type statement struct {
	Type          string     `json:"_type"`
	Subject       []resource `json:"subject"`
	PredicateType string     `json:"predicateType"`
	Predicate     slsa       `json:"predicate"`
}

// A resource is an in-toto ResourceDescriptor.
type resource struct {
	Name   string            `json:"name,omitempty"`
	URI    string            `json:"uri,omitempty"`
	Digest map[string]string `json:"digest"`
}

type slsa struct {
	BuildDefinition buildDefinition `json:"buildDefinition"`
	RunDetails      runDetails      `json:"runDetails"`
}

type buildDefinition struct {
	BuildType            string             `json:"buildType"`
	ExternalParameters   externalParameters `json:"externalParameters"`
	InternalParameters   internalParameters `json:"internalParameters"`
	ResolvedDependencies []resource         `json:"resolvedDependencies"`
}

// externalParameters are what the person who ran the build chose: the
// source, the command and the package it built.
type externalParameters struct {
	Source  resource `json:"source"`
	Command string   `json:"command"`
	Package string   `json:"package"`
}

// internalParameters are what the toolchain recorded: its version and the
// build settings, in the binary's order.
type internalParameters struct {
	Toolchain     string   `json:"toolchain"`
	BuildSettings []string `json:"buildSettings"`
}

type runDetails struct {
	Builder struct {
		ID string `json:"id"`
	} `json:"builder"`
}

// provenance says how b was built: from which revision, by which command,
// with which toolchain and settings. It names no time, host or folder, so
// that a rebuild of the same commit gives the same statement.
func provenance(b build, command string) statement {
	source := resource{
		URI:    "git+" + b.repoURL() + "@" + b.revision,
		Digest: map[string]string{"gitCommit": b.revision},
	}
	st := statement{
		Type:          "https://in-toto.io/Statement/v1",
		Subject:       []resource{{Name: b.file, Digest: map[string]string{"sha256": b.sha256}}},
		PredicateType: "https://slsa.dev/provenance/v1",
		Predicate: slsa{
			BuildDefinition: buildDefinition{
				BuildType: b.repoURL() + "/hack/sbom/go-build/v1",
				ExternalParameters: externalParameters{
					Source:  source,
					Command: command,
					Package: b.info.Path,
				},
				InternalParameters: internalParameters{
					Toolchain:     b.info.GoVersion,
					BuildSettings: settingLines(b.info),
				},
				ResolvedDependencies: []resource{source},
			},
		},
	}
	st.Predicate.RunDetails.Builder.ID = b.repoURL() + "/Makefile"
	return st
}
