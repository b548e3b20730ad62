package main

import (
	"runtime/debug"
	"strconv"
	"strings"
)

// The SPDX 2.3 JSON document, with the fields this SBOM uses, in the order
// of the specification's examples.
type spdxDoc struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreationInfo   `json:"creationInfo"`
	Packages          []spdxPackage      `json:"packages"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxCreationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
	Comment  string   `json:"comment"`
}

type spdxPackage struct {
	Name             string            `json:"name"`
	SPDXID           string            `json:"SPDXID"`
	VersionInfo      string            `json:"versionInfo"`
	PackageFileName  string            `json:"packageFileName,omitempty"`
	DownloadLocation string            `json:"downloadLocation"`
	FilesAnalyzed    bool              `json:"filesAnalyzed"`
	Checksums        []spdxChecksum    `json:"checksums,omitempty"`
	LicenseConcluded string            `json:"licenseConcluded"`
	LicenseDeclared  string            `json:"licenseDeclared"`
	CopyrightText    string            `json:"copyrightText"`
	Comment          string            `json:"comment"`
	ExternalRefs     []spdxExternalRef `json:"externalRefs"`
	PrimaryPurpose   string            `json:"primaryPackagePurpose"`
}

type spdxChecksum struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"checksumValue"`
}

type spdxExternalRef struct {
	Category string `json:"referenceCategory"`
	Type     string `json:"referenceType"`
	Locator  string `json:"referenceLocator"`
}

type spdxRelationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

const (
	noAssertion = "NOASSERTION"
	docID       = "SPDXRef-DOCUMENT"
	binaryID    = "SPDXRef-Package-binary"
	toolchainID = "SPDXRef-Package-go"
)

// spdxDocument describes b: the binary as the package of the main module,
// which the document describes; each other module it links (none, for
// this project); and the Go toolchain that built it and whose standard
// library it links.
func spdxDocument(b build) spdxDoc {
	main := modulePackage(b.info.Main, binaryID)
	main.PackageFileName = b.file
	main.DownloadLocation = "git+" + b.repoURL() + "@" + b.revision
	main.Checksums = []spdxChecksum{{"SHA256", b.sha256}}
	main.Comment = "The binary " + b.file + ", built from the package " + b.info.Path + "."
	main.PrimaryPurpose = "APPLICATION"
	doc := spdxDoc{
		SPDXVersion:       "SPDX-2.3",
		DataLicense:       "CC0-1.0",
		SPDXID:            docID,
		Name:              b.file + "-" + b.info.Main.Version,
		DocumentNamespace: b.repoURL() + "/spdx/" + b.file + "-" + b.info.Main.Version + "-" + b.sha256,
		CreationInfo: spdxCreationInfo{
			Created:  b.time,
			Creators: []string{"Tool: " + b.info.Main.Path + "/hack/sbom"},
			Comment:  "Made from the binary's build information; created is the source commit's time (vcs.time).",
		},
		Packages: []spdxPackage{main, toolchainPackage(b)},
		Relationships: []spdxRelationship{
			{docID, "DESCRIBES", binaryID},
			{binaryID, "STATIC_LINK", toolchainID},
			{toolchainID, "BUILD_TOOL_OF", binaryID},
		},
	}
	for i, m := range b.modules()[1:] {
		id := "SPDXRef-Package-module-" + strconv.Itoa(i+1)
		p := modulePackage(m, id)
		p.PrimaryPurpose = "LIBRARY"
		doc.Packages = append(doc.Packages, p)
		doc.Relationships = append(doc.Relationships, spdxRelationship{binaryID, "STATIC_LINK", id})
	}
	return doc
}

// modulePackage is the package of a Go module, named by its path and
// version and its package URL.
func modulePackage(m debug.Module, id string) spdxPackage {
	return spdxPackage{
		Name:             m.Path,
		SPDXID:           id,
		VersionInfo:      m.Version,
		DownloadLocation: noAssertion,
		LicenseConcluded: noAssertion,
		LicenseDeclared:  noAssertion,
		CopyrightText:    noAssertion,
		ExternalRefs:     []spdxExternalRef{purl("pkg:golang/" + m.Path + "@" + strings.ReplaceAll(m.Version, "+", "%2B"))},
	}
}

// toolchainPackage is the Go toolchain, with its version and the build
// settings in its comment.
func toolchainPackage(b build) spdxPackage {
	return spdxPackage{
		Name:             "go",
		SPDXID:           toolchainID,
		VersionInfo:      b.info.GoVersion,
		DownloadLocation: noAssertion,
		LicenseConcluded: noAssertion,
		LicenseDeclared:  "BSD-3-Clause",
		CopyrightText:    noAssertion,
		Comment: "The Go toolchain that built the binary, and whose standard library the binary links. Build settings:\n" +
			strings.Join(settingLines(b.info), "\n"),
		ExternalRefs:   []spdxExternalRef{purl(b.stdlibPURL())},
		PrimaryPurpose: "LIBRARY",
	}
}

func purl(locator string) spdxExternalRef {
	return spdxExternalRef{"PACKAGE-MANAGER", "purl", locator}
}
