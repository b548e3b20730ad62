// Command spdxcheck validates an SPDX 2.3 JSON document with SPDX's own Go
// tools (github.com/spdx/tools-golang), and prints what they read in it.
// It is a module of its own, which the operator never links: the test of
// hack/sbom builds it to check the SBOM with a reader that is not ours.
//
//	spdxcheck bin/widget-operator.spdx.json
//
// The document passes when tools-golang parses it as SPDX 2.3, its
// validation (spdxlib.ValidateDocument) accepts it, the document describes
// at least one package, every field the specification requires is there,
// and writing the parsed document back gives the same JSON: a field the
// SPDX model does not know, or one in the wrong place, is lost on the way
// and fails the check. It prints a JSON summary of the packages on stdout.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"

	spdxjson "github.com/spdx/tools-golang/json"
	"github.com/spdx/tools-golang/spdx"
	"github.com/spdx/tools-golang/spdxlib"
)

// Summary is what spdxcheck prints: the packages as tools-golang read them.
type Summary struct {
	Described []string  `json:"described"`
	Packages  []Package `json:"packages"`
}

type Package struct {
	ID        string            `json:"id"`
	Name      string            `json:"name"`
	Version   string            `json:"version"`
	FileName  string            `json:"fileName,omitempty"`
	PURLs     []string          `json:"purls"`
	Checksums map[string]string `json:"checksums,omitempty"`
	Comment   string            `json:"comment,omitempty"`
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: spdxcheck FILE.spdx.json")
		os.Exit(2)
	}
	s, err := check(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "spdxcheck:", err)
		os.Exit(1)
	}
	out, _ := json.MarshalIndent(s, "", "  ")
	fmt.Println(string(out))
}

func check(path string) (Summary, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Summary{}, err
	}
	doc, err := spdxjson.Read(bytes.NewReader(data))
	if err != nil {
		return Summary{}, fmt.Errorf("tools-golang cannot read it: %w", err)
	}
	if doc.SPDXVersion != "SPDX-2.3" {
		return Summary{}, fmt.Errorf("spdxVersion %q, want SPDX-2.3", doc.SPDXVersion)
	}
	if err := spdxlib.ValidateDocument(doc); err != nil {
		return Summary{}, fmt.Errorf("tools-golang's validation: %w", err)
	}
	described, err := spdxlib.GetDescribedPackageIDs(doc)
	if err != nil || len(described) == 0 {
		return Summary{}, fmt.Errorf("the document describes no package: %v", err)
	}
	if err := required(doc); err != nil {
		return Summary{}, err
	}
	if err := roundTrip(doc, data); err != nil {
		return Summary{}, err
	}
	return summarize(doc, described), nil
}

// required checks the fields SPDX 2.3 makes mandatory for a document and
// its packages.
func required(doc *spdx.Document) error {
	var missing []string
	need := func(ok bool, field string) {
		if !ok {
			missing = append(missing, field)
		}
	}
	need(doc.DataLicense == "CC0-1.0", "dataLicense CC0-1.0")
	need(doc.SPDXIdentifier == "DOCUMENT", "SPDXID SPDXRef-DOCUMENT")
	need(doc.DocumentName != "", "name")
	need(doc.DocumentNamespace != "", "documentNamespace")
	need(doc.CreationInfo != nil && doc.CreationInfo.Created != "", "creationInfo.created")
	need(doc.CreationInfo != nil && len(doc.CreationInfo.Creators) > 0, "creationInfo.creators")
	for _, p := range doc.Packages {
		need(p.PackageName != "", "a package's name")
		need(p.PackageSPDXIdentifier != "", "package "+p.PackageName+": SPDXID")
		need(p.PackageDownloadLocation != "", "package "+p.PackageName+": downloadLocation")
		for _, c := range p.PackageChecksums {
			need(c.Algorithm != "SHA256" || len(c.Value) == 64, "package "+p.PackageName+": a SHA256 of 64 hex digits")
			need(slices.Contains(algorithms, string(c.Algorithm)), "package "+p.PackageName+": a known checksum algorithm, not "+string(c.Algorithm))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing or wrong: %v", missing)
	}
	return nil
}

// algorithms are the checksum algorithms of SPDX 2.3.
var algorithms = []string{"SHA1", "SHA224", "SHA256", "SHA384", "SHA512", "SHA3-256", "SHA3-384", "SHA3-512",
	"BLAKE2b-256", "BLAKE2b-384", "BLAKE2b-512", "BLAKE3", "MD2", "MD4", "MD5", "MD6", "ADLER32"}

// roundTrip writes the parsed document back and compares it with the
// original as JSON values.
func roundTrip(doc *spdx.Document, data []byte) error {
	var again bytes.Buffer
	if err := spdxjson.Write(doc, &again); err != nil {
		return fmt.Errorf("tools-golang cannot write it back: %w", err)
	}
	var a, b any
	if err := json.Unmarshal(data, &a); err != nil {
		return err
	}
	if err := json.Unmarshal(again.Bytes(), &b); err != nil {
		return err
	}
	if path := firstDifference("", a, b); path != "" {
		return errors.New("tools-golang's model does not hold the document as written: " + path)
	}
	return nil
}

// firstDifference names the first place where a and b differ, or "".
func firstDifference(at string, a, b any) string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := make([]string, 0, len(am)+len(bm))
		for k := range am {
			keys = append(keys, k)
		}
		for k := range bm {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range slices.Compact(keys) {
			if d := firstDifference(at+"."+k, am[k], bm[k]); d != "" {
				return d
			}
		}
		return ""
	}
	as, aok := a.([]any)
	bs, bok := b.([]any)
	if aok && bok && len(as) == len(bs) {
		for i := range as {
			if d := firstDifference(fmt.Sprintf("%s[%d]", at, i), as[i], bs[i]); d != "" {
				return d
			}
		}
		return ""
	}
	if !reflect.DeepEqual(a, b) {
		return fmt.Sprintf("%s: written %v, read back %v", at, a, b)
	}
	return ""
}

func summarize(doc *spdx.Document, described []spdx.ElementID) Summary {
	var s Summary
	for _, id := range described {
		s.Described = append(s.Described, "SPDXRef-"+string(id))
	}
	for _, p := range doc.Packages {
		sp := Package{
			ID:       "SPDXRef-" + string(p.PackageSPDXIdentifier),
			Name:     p.PackageName,
			Version:  p.PackageVersion,
			FileName: p.PackageFileName,
			Comment:  p.PackageComment,
		}
		for _, r := range p.PackageExternalReferences {
			if r.RefType == "purl" {
				sp.PURLs = append(sp.PURLs, r.Locator)
			}
		}
		for _, c := range p.PackageChecksums {
			if sp.Checksums == nil {
				sp.Checksums = map[string]string{}
			}
			sp.Checksums[string(c.Algorithm)] = c.Value
		}
		s.Packages = append(s.Packages, sp)
	}
	return s
}
