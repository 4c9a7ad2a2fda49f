package securitytest

import (
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What every authenticated user may do (system:basic-user): not kshard's rules.
var everybodys = map[string]bool{
	"selfsubjectaccessreviews.authorization.k8s.io": true,
	"selfsubjectrulesreviews.authorization.k8s.io":  true,
	"selfsubjectreviews.authentication.k8s.io":      true,
}

var canIRow = regexp.MustCompile(`^\s*(\S*)\s+(\[[^\]]*\])\s+(\[[^\]]*\])\s+\[([^\]]*)\]\s*$`)

// canIList is `kubectl auth can-i --list` for `user` in `ns`, as "resource [names] verbs" rows
// with the verbs sorted, without non-resource URLs and the rules everybody has.
func canIList(t *testing.T, user, ns string) []string {
	t.Helper()
	out, err := kubectl("auth", "can-i", "--list", "-n", ns, "--as="+user)
	if err != nil {
		t.Fatalf("kubectl auth can-i --list --as=%s -n %s: %v\n%s", user, ns, err, out)
	}
	var rows []string
	for _, line := range strings.Split(out, "\n")[1:] {
		m := canIRow.FindStringSubmatch(line)
		if m == nil || m[1] == "" || m[2] != "[]" || everybodys[m[1]] {
			continue
		}
		verbs := strings.Fields(m[4])
		sort.Strings(verbs)
		rows = append(rows, m[1]+" "+m[3]+" "+strings.Join(verbs, ","))
	}
	sort.Strings(rows)
	return rows
}

func sorted(rows ...string) []string {
	sort.Strings(rows)
	return rows
}

// Issue 29, medium: the operator could list, watch and patch every RoleBinding of the cluster,
// patch ShardMaps, bind its own ClusterRole anywhere; what each may do now is exactly what the
// code uses (charts/kshard/templates/rbac.yaml says which line needs which rule).
func TestTheOperatorAndTheSidecarMayDoWhatTheCodeUsesAndNothingElse(t *testing.T) {
	c := clients(t)
	operator := "system:serviceaccount:" + kshardNamespace + ":kshard"
	everywhere := []string{
		"clusterroles.rbac.authorization.k8s.io [kshard-sidecar] bind",
		"events.events.k8s.io [] create,patch",
		"pods [] get,list,watch",
		"rolebindings.rbac.authorization.k8s.io [] create",
		"rolebindings.rbac.authorization.k8s.io [kshard-sidecar] get,update",
		"shardmaps.kshard.io [] create,get,list,watch",
		"shardmaps.kshard.io/status [] update",
		"shardmapsegments.kshard.io [] create,delete,get,list",
		"tokenreviews.authentication.k8s.io [] create",
	}
	if got := canIList(t, operator, victimNamespace); !slices.Equal(got, sorted(everywhere...)) {
		t.Errorf("the operator in %s may:\n  %s\nwant:\n  %s", victimNamespace,
			strings.Join(got, "\n  "), strings.Join(sorted(everywhere...), "\n  "))
	}
	home := sorted(append(slices.Clone(everywhere),
		"leases.coordination.k8s.io [] create",
		"leases.coordination.k8s.io [kshard-operator] get,update",
		"serviceaccounts/token [kshard] create")...)
	if got := canIList(t, operator, kshardNamespace); !slices.Equal(got, home) {
		t.Errorf("the operator in %s may:\n  %s\nwant:\n  %s", kshardNamespace,
			strings.Join(got, "\n  "), strings.Join(home, "\n  "))
	}

	deploy, err := c.Clientset.AppsV1().Deployments(victimNamespace).Get(bg(), victimMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	account := deploy.Spec.Template.Spec.ServiceAccountName
	if account == "" {
		account = "default"
	}
	sidecar := "system:serviceaccount:" + victimNamespace + ":" + account
	want := []string{"shardentities.kshard.io [] create,get,list,update",
		"shardmaps.kshard.io [] get,list,watch", "shardmapsegments.kshard.io [] get"}
	if got := canIList(t, sidecar, victimNamespace); !slices.Equal(got, want) {
		t.Errorf("the sidecar in %s may:\n  %s\nwant:\n  %s", victimNamespace, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	if got := canIList(t, sidecar, attackNamespace); len(got) != 0 {
		t.Errorf("the sidecar of %s may in another namespace:\n  %s", victimNamespace, strings.Join(got, "\n  "))
	}
}

// RBAC lets whoever may create RoleBindings grant any role whose rules it holds: the operator
// could hand its own ClusterRole to any account. The chart's ValidatingAdmissionPolicy lets it
// write only the one RoleBinding the code writes.
func TestTheOperatorWritesOnlyTheSidecarsRoleBinding(t *testing.T) {
	c := clients(t)
	// A namespace without the sidecars' RoleBinding, so that a create is refused for what it
	// grants, not because the object exists.
	const ns = "kshard-rbac-probe"
	if _, err := kubectl("create", "namespace", ns); err != nil {
		if _, err := c.Clientset.CoreV1().Namespaces().Get(bg(), ns, metav1.GetOptions{}); err != nil {
			t.Fatalf("namespace %s: %v", ns, err)
		}
	}
	t.Cleanup(func() { _, _ = kubectl("delete", "namespace", ns, "--wait=false") })
	operator := "--as=system:serviceaccount:" + kshardNamespace + ":kshard"
	try := func(name, clusterRole, subject string) (string, error) {
		return kubectl("create", "rolebinding", name, "-n", ns, "--clusterrole="+clusterRole,
			"--serviceaccount="+subject, "--dry-run=server", operator)
	}
	for _, attempt := range []struct{ name, role, subject string }{
		{"kshard-sidecar", "kshard-operator", ns + ":default"},       // its own rules
		{"kshard-sidecar", "view", ns + ":default"},                  // rules it lacks
		{"elevated", "kshard-sidecar", ns + ":default"},              // another name
		{"kshard-sidecar", "kshard-sidecar", victimNamespace + ":x"}, // another namespace's account
	} {
		out, err := try(attempt.name, attempt.role, attempt.subject)
		if err == nil {
			t.Errorf("the operator may create RoleBinding %s granting %s to %s:\n%s",
				attempt.name, attempt.role, attempt.subject, out)
		} else if !strings.Contains(out, "denied") && !strings.Contains(out, "forbidden") {
			t.Errorf("RoleBinding %s granting %s to %s failed, but not as refused: %s",
				attempt.name, attempt.role, attempt.subject, out)
		}
	}
	if out, err := try("kshard-sidecar", "kshard-sidecar", ns+":default"); err != nil {
		t.Errorf("the operator may not write the sidecars' RoleBinding: %v\n%s", err, out)
	}
}
