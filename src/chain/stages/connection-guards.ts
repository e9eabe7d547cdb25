// Stages `interception` and `credential-guard`: an inspected route needs the interception CA (503 without it); a
// route that carries credentials but cannot be inspected (`tls: skip`, raw TCP) is refused with a finding, since its
// placeholders could never be swapped and its secrets never bound.

import { formatAuthority } from '../../net/host.js';
import { uninspectedCredentialsDenial } from '../denials.js';
import { tlsUnavailableDenial } from '../upstream-denials.js';
import type { Interception } from '../../tls/intercept.js';
import type { ConnectionRequest } from '../connection.js';
import { CONTINUE, denied, type Stage } from '../stage.js';

export function createInterceptionStage(deps: { readonly interception: Interception }): Stage<ConnectionRequest> {
  const { interception } = deps;
  return {
    name: 'interception',
    run(c) {
      if (!c.inspect || interception.ready()) return CONTINUE;
      const target = formatAuthority(c.host as string, c.port as number);
      return denied(tlsUnavailableDenial(target), 'tls-unavailable', `${target} needs inspection but the interception CA is unavailable`);
    },
  };
}

export function createCredentialGuardStage(): Stage<ConnectionRequest> {
  return {
    name: 'credential-guard',
    run(c) {
      if (c.credentialRoute !== 'refuse') return CONTINUE;
      const target = formatAuthority(c.host as string, c.port as number);
      const detail = `${target} carries credentials but its route is not inspected`;
      return denied(uninspectedCredentialsDenial(target), 'uninspected-credentials', detail, 'uninspected-credentials');
    },
  };
}
