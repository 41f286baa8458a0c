import { valueDocs, valuesTable, type ValueDoc } from "../../scripts/lib/chart-readme.ts";

describe("the chart README's values, read from values.yaml's comments", () => {
  const cases: Array<{ reason: string; yaml: string; want: ValueDoc[] }> = [
    {
      reason: "the comment right above a key documents it, its lines joined",
      yaml: "# Two replicas:\n# one leads.\nreplicaCount: 2\n",
      want: [{ path: "replicaCount", default: "2", description: "Two replicas: one leads." }],
    },
    {
      reason: "a blank line ends a comment block: a section comment documents nothing",
      yaml: "# Section.\n\nlogLevel: info\n",
      want: [{ path: "logLevel", default: '"info"', description: "" }],
    },
    {
      reason: "a commented-out example under a key does not document the next key",
      yaml: "extra: []\n#  - apiGroups: [x]\n\n# Secrets.\nallowSecrets: false\n",
      want: [
        { path: "extra", default: "[]", description: "" },
        { path: "allowSecrets", default: "false", description: "Secrets." },
      ],
    },
    {
      reason: "children are listed by their dotted path; a map is listed only with a comment of its own",
      yaml: "image:\n  # The tag.\n  tag: ''\nresources:\n  limits:\n    memory: 512Mi\n",
      want: [
        { path: "image.tag", default: '""', description: "The tag." },
        { path: "resources.limits.memory", default: '"512Mi"', description: "" },
      ],
    },
    {
      reason: "an empty map is a value, with its default",
      yaml: "# Labels.\ncommonLabels: {}\n",
      want: [{ path: "commonLabels", default: "{}", description: "Labels." }],
    },
  ];
  it.each(cases)("$reason", ({ yaml, want }) => {
    expect(valueDocs(yaml)).toEqual(want);
  });

  it("escapes a | in a description, so the table keeps its columns", () => {
    const table = valuesTable([{ path: "a", default: '"x|y"', description: "json|text" }]);
    expect(table.split("\n")[2]).toBe('| `a` | `"x\\|y"` | json\\|text |');
  });
});
