import { runResolverContract } from '../contracts/resolver.contract.js';
import { fakeResolver } from '../harness/fake-resolver.js';

runResolverContract('fakeResolver', async (records) => ({ resolver: fakeResolver(records), close: async () => {} }));
