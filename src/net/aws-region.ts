// The AWS region an AWS hostname names (OpenShell's rule, docs/credentials.md#sigv4-signing): the label before
// amazonaws.com, past any dualstack labels, or before amazonaws.com.cn. Pure; shared by policy load and signing.

/** A label is a region only if it holds `-` then a digit (us-east-1, eu-central-2); `s3` or `bucket` are not. */
function isRegion(label: string | undefined): label is string {
  return label !== undefined && /-[0-9]/.test(label);
}

/** The region, or undefined for a global or non-AWS host (s3.amazonaws.com, api.example.test). */
export function regionFromHost(host: string): string | undefined {
  const labels = host.toLowerCase().replace(/\.$/, '').split('.');
  let end = labels.length;
  if (labels[end - 1] === 'cn' && labels[end - 2] === 'com' && labels[end - 3] === 'amazonaws') {
    return isRegion(labels[end - 4]) ? labels[end - 4] : undefined;
  }
  if (labels[end - 1] !== 'com' || labels[end - 2] !== 'amazonaws') return undefined;
  end -= 2;
  while (labels[end - 1] === 'dualstack') end -= 1;
  return isRegion(labels[end - 1]) ? labels[end - 1] : undefined;
}
